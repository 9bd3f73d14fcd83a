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
from ..engine.tools import TOOLS
from ..hosts.identity import CALL_ARG
from ..http.auth import PRINCIPAL
from .binding import SessionBinding
from .delivery import EXCHANGE, report_writes, run_call
from .notices_feed import DEFAULT_POLL_INTERVAL, NoticeFeed
from .routing import RoutedBinding
from .texts import instructions, tools_json


def tool_list() -> list[types.Tool]:
    """The published tools (``texts.tools_json``) as SDK types."""
    return [types.Tool.model_validate(t) for t in tools_json()]


def build_server(binding: SessionBinding | RoutedBinding, *, poll_interval: float = DEFAULT_POLL_INTERVAL) -> Server:
    """A low-level MCP server whose every tool call runs as ``binding.session_key`` (or, bound late, the
    session the host names in the call; a ``RoutedBinding``: the session each call names).

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
        exchange = request.scope.get(EXCHANGE) if request is not None and hasattr(request, "scope") else None
        args = dict(params.arguments or {})
        named = args.pop(CALL_ARG, None)  # a host's plugin names the calling session (OpenCode): routing.py
        # Off the event loop; a cancelled call leaves its notices queued (mcpserver.delivery).
        # the call's _meta may name the host session (Codex: threadId), for a server bound late
        outcome = await run_call(
            binding.for_call(named), ctx.request_id, params.name, args, scope, exchange, params.meta
        )
        feed.kick()  # the call may have delivered notices: subscribers see the list change
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text())],
            structured_content=outcome.structured(),
            is_error=outcome.is_error,
        )

    async def list_resources(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[feed.resource()] if binding.session_key else [])

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
        instructions=instructions(binding.session_key),
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
    server.session_binding = binding  # type: ignore[attr-defined]  # http_app reports deliveries to it
    return report_writes(server, binding)  # notices are acknowledged once their answer is written
