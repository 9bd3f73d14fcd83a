"""The MCP server: the six engine tools, with their own JSON Schemas, bound to one caller session.

Built on the SDK's low-level ``Server`` because the tool schemas are data (``engine.tools.TOOLS``):
``MCPServer`` would infer a schema from Python signatures instead of publishing ours.
"""

from __future__ import annotations

from mcp import types
from mcp.server import Server, ServerRequestContext

from .. import __version__
from ..engine.tools import TOOLS
from .binding import SessionBinding
from .delivery import report_writes, run_call

INSTRUCTIONS = (
    "sessionwatch tools, called as session {key}. When a result starts with 'System: ... changed (other "
    "actor)', another actor touched a session you work with: call session_status with the sessionKey and "
    "changesSince from that line before acting on it. A notice comes again only if its earlier answer "
    "never reached you."
)


def tool_list() -> list[types.Tool]:
    """The published tools: names, descriptions and input schemas exactly as the engine defines them."""
    return [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in TOOLS.values()]


def build_server(binding: SessionBinding) -> Server:
    """A low-level MCP server whose every tool call runs as ``binding.session_key``."""

    async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        # Off the event loop; a cancelled call leaves its notices queued (mcpserver.delivery).
        outcome = await run_call(binding, ctx.request_id, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text())],
                                    structured_content=outcome.structured(), is_error=outcome.is_error)

    server = Server("sessionwatch", version=__version__, instructions=INSTRUCTIONS.format(key=binding.session_key),
                    get_tool_input_schema=lambda name: TOOLS[name].input_schema if name in TOOLS else None,
                    on_list_tools=list_tools, on_call_tool=call_tool)
    return report_writes(server, binding)  # notices are acknowledged once their answer is written
