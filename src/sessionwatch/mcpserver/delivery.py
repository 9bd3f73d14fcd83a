"""When is a tool result delivered? The MCP half of at-least-once notices (see ``binding``).

``run_call`` runs one tool call for the SDK handler: a call cancelled by the client
(``notifications/cancelled``: the SDK cancels the handler and never answers it) abandons what it
attached, so those notices stay queued. ``report_writes`` makes a server tell the binding when the
transport took an answer (stdio and in-memory: ``Server.run``), and the answer's notices are
acknowledged right then; on transports it does not wrap (streamable HTTP) they are acknowledged when
the session's next call starts.
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

from .binding import SessionBinding, ToolOutcome

log = logging.getLogger("sessionwatch.mcp")


async def run_call(
    binding: SessionBinding, request_id: object, name: str, args: dict[str, Any], scope: frozenset[str] | None = None
) -> ToolOutcome:
    ticket = binding.open_call()
    try:
        # The engine is synchronous (and sessions_send may wait for a reply): keep it off the event loop.
        # A cancel lands once the worker returns; then nothing it attached counts as delivered.
        outcome = await anyio.to_thread.run_sync(binding.call, name, args, ticket, scope)
        # A cancel that arrived while the worker ran is delivered only at a checkpoint: take it here, or
        # this answer would count as delivered although the SDK will never send it.
        await anyio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        binding.abandon(ticket)
        raise
    binding.answered(ticket, request_id)
    return outcome


class _ReportingStream:
    """The server's write stream, reporting each answer to the binding once the transport took it."""

    def __init__(self, inner: Any, binding: SessionBinding) -> None:
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


def report_writes(server: Server, binding: SessionBinding) -> Server:
    """Make ``server.run`` (stdio, in-memory) report written answers to ``binding``."""
    plain_run = server.run

    async def run(read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
        binding.reports_writes = True
        await plain_run(read_stream, _ReportingStream(write_stream, binding), *args, **kwargs)

    server.run = run  # type: ignore[method-assign]
    return server
