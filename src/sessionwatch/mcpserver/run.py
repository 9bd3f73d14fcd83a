"""Serve a bound MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import SessionwatchError
from ..repeats import flush_all
from ..serving.exposure import check_exposure, is_loopback  # noqa: F401 - is_loopback re-exported
from ..serving.limits import Limits, descriptor_budget, uvicorn_config
from ..serving.origin import BrowserGuard, RequestPolicy
from ..serving.tokengate import Hold, TokenGate, TokenLimits, authorization_of, send_refusal

log = logging.getLogger("sessionwatch.mcp")


def run_stdio(server: Server) -> None:
    """Blocking: the host launched us; stdout is the wire, logs go to stderr."""

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


class BearerGuard:
    """Refuse requests without a valid ``Authorization: Bearer <token>``: the ``--http-token`` (admin), or
    a live token of the store's token table that covers the bound session's agent. The resolved
    principal travels in the ASGI scope; the tool handler limits every target to its agents.

    A request made with a stored token runs under the token gate (serving/tokengate.py): the token's
    limits on open streams (a GET is the session's stream) and requests in progress, and the end of its
    requests once it is revoked. The MCP sessions a stored token opened are terminated then too."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        token_table: Callable[[], Any] | None = None,
        bound_agent: str | None = None,
        token_limits: TokenLimits | None = None,
        connections: int | None = None,
        path: str = "/mcp",
    ) -> None:
        from ..http.auth import Authenticator

        self.app = app
        self.path = path  # the SDK app's endpoint: where a revoked token's sessions are ended
        self.auth = Authenticator(token, token_table or (lambda: None))
        self.bound_agent = bound_agent
        cap = connections if connections is not None else Limits().max_connections
        self.gate = TokenGate(token_limits, cap, self.auth.live if token_table is not None else None)
        self._sessions: dict[str, Hold] = {}  # MCP session id -> its hold on the token that opened it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from ..http.auth import PRINCIPAL

        try:
            principal = await self.auth.resolve(authorization_of(scope.get("headers") or []))
            principal.require_agent(self.bound_agent, "bound session")
            hold = self.gate.admit(principal, stream=scope.get("method") == "GET")
        except SessionwatchError as exc:
            await send_refusal(send, exc)
            return
        scope[PRINCIPAL] = principal
        if hold is None:
            await self.app(scope, receive, send)
            return
        session = _session_id(scope)
        noted = send if session is not None else self._noting_new_session(hold.token_id, send)
        try:
            await self.gate.serve(hold, self.app, scope, receive, noted)
        finally:
            self.gate.release(hold)
        if session is not None and scope.get("method") == "DELETE":
            self._forget(session)  # the client ended it

    def _noting_new_session(self, token_id: str, send: Send) -> Send:
        """``send``, noting the session id an opening request is answered with (it belongs to ``token_id``)."""

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers") or ():
                    if name.lower() == SESSION_HEADER:
                        self._note(value.decode("latin-1"), token_id)
            await send(message)

        return noting

    def _note(self, session: str, token_id: str) -> None:
        if session in self._sessions:
            return
        if len(self._sessions) >= MAX_TRACKED_SESSIONS:  # sessions that ended by idling out: forget the oldest
            self._forget(next(iter(self._sessions)))
        self._sessions[session] = self.gate.hold_session(token_id, lambda: self._terminate(session))

    def _forget(self, session: str) -> None:
        hold = self._sessions.pop(session, None)
        if hold is not None:
            self.gate.release(hold)

    async def _terminate(self, session: str) -> None:
        """End an MCP session as its client would: a DELETE with its id, straight to the SDK's app."""
        self._sessions.pop(session, None)
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(SESSION_HEADER, session.encode("latin-1"))],
            "client": None,
            "server": None,
        }

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        try:
            await self.app(scope, receive, discard)
        except Exception as exc:  # noqa: BLE001 - its requests were cut already; the SDK idles it out
            log.warning("ending MCP session %s of a revoked token failed: %s", session[:16], exc)


SESSION_HEADER = b"mcp-session-id"
MAX_TRACKED_SESSIONS = 10_000


def _session_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == SESSION_HEADER:
            return value.decode("latin-1")
    return None


def http_app(
    server: Server,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    path: str = "/mcp",
    policy: RequestPolicy | None = None,
    token_table: Callable[[], Any] | None = None,
    bound_agent: str | None = None,
    token_limits: TokenLimits | None = None,
    connections: int | None = None,
) -> Any:
    """The streamable-HTTP ASGI app; beyond loopback a strong bearer token is required.

    Host, Origin and Content-Type are checked by our ``BrowserGuard`` with the same rules and options as
    the REST gateway. The SDK's own check is switched off: on loopback it accepts every local Origin
    (``http://localhost:*``, so any page served from this machine), and on other addresses it checks nothing.
    With a token, ``token_table`` (the local engine, when there is one) also lets the store's tokens in:
    admin ones, and scoped ones covering ``bound_agent``, each within ``token_limits`` (out of
    ``connections``, the server's connection cap).
    """
    check_exposure(host, token, what="the MCP transport", option="--http-token or --http-token-file")
    app: Any = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    binding = getattr(server, "session_binding", None)
    if binding is not None:  # notices count as delivered only once a client provably read them
        from .delivery import ReportDeliveries

        app = ReportDeliveries(app, binding)
    if token:
        app = BearerGuard(
            app,
            token,
            token_table=token_table,
            bound_agent=bound_agent,
            token_limits=token_limits,
            connections=connections,
            path=path,
        )
    return BrowserGuard(app, policy=policy)


def run_http(
    server: Server,
    *,
    host: str = "127.0.0.1",
    port: int = 7879,
    token: str | None = None,
    path: str = "/mcp",
    log_level: str = "info",
    policy: RequestPolicy | None = None,
    limits: Limits | None = None,
    token_table: Callable[[], Any] | None = None,
    bound_agent: str | None = None,
    sock: socket.socket | None = None,
    token_limits: TokenLimits | None = None,
) -> None:
    """Blocking: serve streamable HTTP with uvicorn at http://host:port/mcp (or on ``sock``, an inherited
    listening socket: ``--fd``)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    limits = limits or Limits()
    cap = descriptor_budget(limits.max_connections)
    app = http_app(
        server,
        host=host,
        token=token,
        path=path,
        policy=policy,
        token_table=token_table,
        bound_agent=bound_agent,
        token_limits=token_limits,
        connections=cap,
    )
    log_config = copy.deepcopy(LOGGING_CONFIG)
    for handler in log_config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # uvicorn's access log defaults to stdout; keep stdout clean
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        port = int(sock.getsockname()[1])  # the inherited socket's port, not the --port default
    log.info("MCP streamable HTTP on http://%s:%d%s", host, port, path)
    _Server(
        uvicorn_config(app, host=host, port=port, limits=limits, cap=cap, log_level=log_level, log_config=log_config)
    ).run(sockets=[sock] if sock is not None else None)


class _Server(uvicorn.Server):
    async def shutdown(self, sockets: Any = None) -> None:
        await super().shutdown(sockets)
        flush_all()  # uvicorn ends the process by raising the signal again: no exit hook would run
