"""The MCP server: the six engine tools, with their own JSON Schemas, bound to one caller session.

Built on the SDK's low-level ``Server`` because the tool schemas are data (``engine.tools.TOOLS``):
``MCPServer`` would infer a schema from Python signatures instead of publishing ours. Besides the
tools it serves one resource, the bound session's pending notices (``notices_feed``), with
subscriptions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import types
from mcp.server import Server, ServerRequestContext

from .. import __version__
from ..engine.schemas import QUEUE_ENTRY, Schema, result_or_error
from ..engine.tools import TOOLS, Tool
from ..http.auth import PRINCIPAL
from .binding import SessionBinding
from .delivery import report_writes, run_call
from .notices_feed import DEFAULT_POLL_INTERVAL, NoticeFeed

INSTRUCTIONS = (
    "sessionwatch tools, called as session {key}. When a result starts with 'System: ... changed (other "
    "actor)', another actor touched a session you work with: call session_status with the sessionKey and "
    "changesSince from that line before acting on it. A notice comes again only if its earlier answer "
    "never reached you. The resource {uri} lists the notices still pending (reading it does not consume "
    "them); subscribe to it to be told when one arrives."
)

# Every structured result of this face carries the notices that rode along with it (see binding.py).
SYSTEM_EVENTS: Schema = {
    "type": "array",
    "items": QUEUE_ENTRY,
    "description": "Notices for the bound session delivered with this result (often empty).",
}


def output_schema(tool: Tool) -> Schema:
    """The tool's result (or the error object), plus ``systemEvents``: exactly what ``structuredContent`` holds.

    Error results validate too: the MCP specification leaves open whether ``outputSchema`` applies to
    ``isError`` results (the SDKs skip them), so the schema admits both rather than betting on a client.
    """
    return result_or_error(tool.result_schema, {"systemEvents": SYSTEM_EVENTS})


def tool_list() -> list[types.Tool]:
    """The published tools: names, titles, descriptions, annotations and schemas as the engine defines them."""
    return [
        types.Tool(
            name=t.name,
            title=t.title,
            description=t.description,
            input_schema=t.input_schema,
            output_schema=output_schema(t),
            annotations=types.ToolAnnotations(
                title=t.title,
                read_only_hint=t.hints.read_only,
                destructive_hint=t.hints.destructive,
                idempotent_hint=t.hints.idempotent,
                open_world_hint=t.hints.open_world,
            ),
        )
        for t in TOOLS.values()
    ]


def build_server(binding: SessionBinding, *, poll_interval: float = DEFAULT_POLL_INTERVAL) -> Server:
    """A low-level MCP server whose every tool call runs as ``binding.session_key``.

    ``poll_interval`` (seconds, 0 = off) is how often subscribed notices are re-checked besides wakes.
    """
    feed = NoticeFeed(binding, poll_interval=poll_interval)

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        # A scoped bearer token (HTTP transport) limits every session the tool touches to its agents.
        request = getattr(ctx, "request", None)
        principal = request.scope.get(PRINCIPAL) if request is not None and hasattr(request, "scope") else None
        scope = principal.agent_filter() if principal is not None else None
        # Off the event loop; a cancelled call leaves its notices queued (mcpserver.delivery).
        outcome = await run_call(binding, ctx.request_id, params.name, dict(params.arguments or {}), scope)
        feed.kick()  # the call may have delivered notices: subscribers see the list change
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text())],
            structured_content=outcome.structured(),
            is_error=outcome.is_error,
        )

    async def list_resources(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[feed.resource()])

    async def read_resource(
        ctx: ServerRequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await feed.read(params.uri)

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with feed.running():
            yield {"notices": feed}

    server: Server = Server(
        "sessionwatch",
        version=__version__,
        instructions=INSTRUCTIONS.format(key=binding.session_key, uri=feed.uri),
        lifespan=lifespan,
        get_tool_input_schema=lambda name: TOOLS[name].input_schema if name in TOOLS else None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=feed.subscribe,
        on_unsubscribe_resource=feed.unsubscribe,
        on_subscriptions_listen=feed.listen,
    )
    server.notice_feed = feed  # type: ignore[attr-defined]  # for tests and embedding code
    return report_writes(server, binding)  # notices are acknowledged once their answer is written
