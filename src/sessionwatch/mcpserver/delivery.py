"""When is a tool result delivered? The MCP half of at-least-once notices (see ``binding``).

``run_call`` runs one tool call for the SDK handler: a call cancelled by the client
(``notifications/cancelled``: the SDK cancels the handler and never answers it) abandons what it
attached, so those notices stay queued. ``report_writes`` makes a server tell the binding when the
transport took an answer (stdio and in-memory: ``Server.run``), and the answer's notices are
acknowledged right then. On streamable HTTP, ``ReportDeliveries`` (an ASGI wrapper) follows each
request: an answer counts as written once the body message carrying it went out while the client was
still connected, and it is acknowledged at the same MCP session's next tool call
(``SessionBinding.exchange_done``). A connection reset before that leaves the notices queued for
whichever session calls next.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server import Server
from mcp_types import JSONRPCResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..serving.peer import client_gone
from .binding import Exchange, SessionBinding, ToolOutcome
from .routing import RoutedBinding

log = logging.getLogger("sessionwatch.mcp")

EXCHANGE = "sessionwatch.mcp_exchange"  # the ASGI scope key of a request's Exchange
SESSION_HEADER = b"mcp-session-id"


async def run_call(
    binding: SessionBinding,
    request_id: object,
    name: str,
    args: dict[str, Any],
    scope: frozenset[str] | None = None,
    exchange: Exchange | None = None,
    meta: Any = None,
) -> ToolOutcome:
    ticket = binding.open_call()
    session = exchange.session if exchange is not None else None
    try:
        # The engine is synchronous (and sessions_send may wait for a reply): keep it off the event loop.
        # A cancel lands once the worker returns; then nothing it attached counts as delivered.
        outcome = await anyio.to_thread.run_sync(binding.call, name, args, ticket, scope, session, meta)
        # A cancel that arrived while the worker ran is delivered only at a checkpoint: take it here, or
        # this answer would count as delivered although the SDK will never send it.
        await anyio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        binding.abandon(ticket)
        raise
    binding.answered(ticket, request_id, exchange)
    return outcome


def _session_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == SESSION_HEADER:
            return str(value.decode("latin-1"))
    return None


class ReportDeliveries:
    """Streamable HTTP: tell the binding which answers reached a connected client to their end.

    Each POST gets an ``Exchange`` in its scope (the tool handler hands it to ``run_call``); its answer
    counts as written when the body message carrying it goes out and the server has not seen the client
    go away by then. A ``DELETE`` (the client ends its session) confirms that session's answers like a call.
    """

    def __init__(self, app: ASGIApp, binding: SessionBinding) -> None:
        self.app = app
        self.binding = binding

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "DELETE"):
            await self.app(scope, receive, send)
            return
        exchange = Exchange(_session_of(scope))
        if scope["method"] == "DELETE":
            await self.app(scope, receive, send)
            self.binding.confirm(exchange.session)
            await anyio.to_thread.run_sync(self.binding.settle)
            return
        scope[EXCHANGE] = exchange
        carried = False  # a body message held a JSON-RPC answer (not only a priming event or a ping)

        async def watching(message: Message) -> None:
            nonlocal carried
            if message["type"] == "http.response.body" and exchange.ids and not carried:
                body = message.get("body", b"")
                if b'"result"' in body or b'"error"' in body:
                    # The message that carries the answer (a JSON body, or the SSE event holding it) goes out
                    # to a client still connected: that is the delivery. Not the stream's end after it: an
                    # SSE client may close its stream as soon as it has the answer, before that end is sent.
                    carried = True
                    exchange.sent = not await client_gone(scope, receive)
            await send(message)

        try:
            await self.app(scope, receive, watching)
        finally:
            if self.binding.exchange_done(exchange):
                await anyio.to_thread.run_sync(self.binding.settle)


class _ReportingStream:
    """The server's write stream, reporting each answer to the binding once the transport took it."""

    def __init__(self, inner: Any, binding: SessionBinding | RoutedBinding) -> None:
        self._inner = inner
        self._binding = binding

    async def send(self, item: Any, /) -> None:
        await self._inner.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCResponse) and self._binding.written(message.id):
            await anyio.to_thread.run_sync(self._binding.settle)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _ReportingStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def report_writes(server: Server, binding: SessionBinding | RoutedBinding) -> Server:
    """Make ``server.run`` (stdio, in-memory) report written answers to ``binding``."""
    plain_run = server.run

    async def run(read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
        binding.reports_writes = True
        await plain_run(read_stream, _ReportingStream(write_stream, binding), *args, **kwargs)

    server.run = run  # type: ignore[method-assign]
    return server
