"""The MCP face: ``sessionwatch mcp --session KEY`` serves the engine tools bound to one caller session.

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding, build_server, run_stdio

binding = SessionBinding(Gateway.open("sqlite:///state.db"), "agent:main:main")
binding.ensure_session()
run_stdio(build_server(binding))
"""

from .binding import SessionBinding, ToolBackend, ToolOutcome
from .notices_feed import NoticeFeed, notices_uri
from .run import http_app, is_loopback, run_http, run_stdio
from .server import build_server, tool_list

__all__ = [
    "SessionBinding",
    "ToolBackend",
    "ToolOutcome",
    "NoticeFeed",
    "notices_uri",
    "build_server",
    "tool_list",
    "run_stdio",
    "run_http",
    "http_app",
    "is_loopback",
]
