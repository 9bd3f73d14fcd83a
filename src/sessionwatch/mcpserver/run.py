"""Serve a bound MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import hmac
import logging
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from ..http.exposure import check_exposure, is_loopback  # noqa: F401 - is_loopback re-exported
from ..http.limits import Limits, uvicorn_config
from ..http.origin import BrowserGuard, RequestPolicy

log = logging.getLogger("sessionwatch.mcp")


def run_stdio(server: Server) -> None:
    """Blocking: the host launched us; stdout is the wire, logs go to stderr."""

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


class BearerGuard:
    """Refuse requests without ``Authorization: Bearer <token>`` (constant-time compare)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": {"code": "unauthorized", "message": "missing or wrong bearer token"}}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: Server, *, host: str = "127.0.0.1", token: str | None = None, path: str = "/mcp",
             policy: RequestPolicy | None = None) -> Any:
    """The streamable-HTTP ASGI app; beyond loopback a strong bearer token is required.

    Host, Origin and Content-Type are checked by our ``BrowserGuard`` with the same rules and options as
    the REST gateway. The SDK's own check is switched off: on loopback it accepts every local Origin
    (``http://localhost:*``, so any page served from this machine), and on other addresses it checks nothing.
    """
    check_exposure(host, token, what="the MCP transport", option="--http-token or --http-token-file")
    app: Any = server.streamable_http_app(
        streamable_http_path=path, host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    if token:
        app = BearerGuard(app, token)
    return BrowserGuard(app, policy=policy)


def run_http(server: Server, *, host: str = "127.0.0.1", port: int = 7879, token: str | None = None,
             path: str = "/mcp", log_level: str = "info", policy: RequestPolicy | None = None,
             limits: Limits | None = None) -> None:
    """Blocking: serve streamable HTTP with uvicorn at http://host:port/mcp."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    app = http_app(server, host=host, token=token, path=path, policy=policy)
    log_config = copy.deepcopy(LOGGING_CONFIG)
    for handler in log_config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # uvicorn's access log defaults to stdout; keep stdout clean
    log.info("MCP streamable HTTP on http://%s:%d%s", host, port, path)
    uvicorn.Server(uvicorn_config(app, host=host, port=port, limits=limits, log_level=log_level,
                                  log_config=log_config)).run()
