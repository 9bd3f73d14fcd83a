"""Serve a bound MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import SessionwatchError
from ..serving.exposure import check_exposure, is_loopback  # noqa: F401 - is_loopback re-exported
from ..serving.limits import Limits, uvicorn_config
from ..serving.origin import BrowserGuard, RequestPolicy

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
    principal travels in the ASGI scope; the tool handler limits every target to its agents."""

    def __init__(
        self, app: ASGIApp, token: str, *, store: Callable[[], Any] | None = None, bound_agent: str | None = None
    ) -> None:
        from ..http.auth import Authenticator

        self.app = app
        self.auth = Authenticator(token, store or (lambda: None))
        self.bound_agent = bound_agent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            from ..http.auth import PRINCIPAL

            header = dict(scope.get("headers") or []).get(b"authorization")
            try:
                principal = await self.auth.resolve(header)
                principal.require_agent(self.bound_agent, "bound session")
            except SessionwatchError as exc:
                extra = [(b"www-authenticate", b"Bearer")] if exc.http_status == 401 else []
                await send(
                    {
                        "type": "http.response.start",
                        "status": exc.http_status,
                        "headers": [(b"content-type", b"application/json"), *extra],
                    }
                )
                await send({"type": "http.response.body", "body": json.dumps(exc.to_json()).encode()})
                return
            scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def http_app(
    server: Server,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    path: str = "/mcp",
    policy: RequestPolicy | None = None,
    store: Callable[[], Any] | None = None,
    bound_agent: str | None = None,
) -> Any:
    """The streamable-HTTP ASGI app; beyond loopback a strong bearer token is required.

    Host, Origin and Content-Type are checked by our ``BrowserGuard`` with the same rules and options as
    the REST gateway. The SDK's own check is switched off: on loopback it accepts every local Origin
    (``http://localhost:*``, so any page served from this machine), and on other addresses it checks nothing.
    With a token, ``store`` (the local store, when there is one) also lets tokens of its token table in:
    admin ones, and scoped ones covering ``bound_agent``.
    """
    check_exposure(host, token, what="the MCP transport", option="--http-token or --http-token-file")
    app: Any = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    if token:
        app = BearerGuard(app, token, store=store, bound_agent=bound_agent)
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
    store: Callable[[], Any] | None = None,
    bound_agent: str | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Blocking: serve streamable HTTP with uvicorn at http://host:port/mcp (or on ``sock``, an inherited
    listening socket: ``--fd``)."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    app = http_app(server, host=host, token=token, path=path, policy=policy, store=store, bound_agent=bound_agent)
    log_config = copy.deepcopy(LOGGING_CONFIG)
    for handler in log_config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # uvicorn's access log defaults to stdout; keep stdout clean
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        port = int(sock.getsockname()[1])  # the inherited socket's port, not the --port default
    log.info("MCP streamable HTTP on http://%s:%d%s", host, port, path)
    uvicorn.Server(
        uvicorn_config(app, host=host, port=port, limits=limits, log_level=log_level, log_config=log_config)
    ).run(sockets=[sock] if sock is not None else None)
