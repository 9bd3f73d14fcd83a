"""The MCP face: ``sessionwatch mcp --session KEY`` serves the engine tools bound to one caller session.

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding, build_server, run_stdio

binding = SessionBinding(Gateway.open("sqlite:///state.db"), "agent:main:main")
binding.ensure_session()
run_stdio(build_server(binding))

The names load on first use: the MCP SDK takes half a second to import, and the quick start
(``quickstart.py``) answers a host's handshake before it has loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .binding import SessionBinding, ToolBackend, ToolOutcome
    from .notices_feed import NoticeFeed
    from .run import http_app, is_loopback, run_http, run_stdio
    from .server import build_server, tool_list
    from .texts import notices_uri

_WHERE = {
    "SessionBinding": "binding",
    "ToolBackend": "binding",
    "ToolOutcome": "binding",
    "NoticeFeed": "notices_feed",
    "notices_uri": "texts",
    "build_server": "server",
    "tool_list": "server",
    "run_stdio": "run",
    "run_http": "run",
    "http_app": "run",
    "is_loopback": "run",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
