"""Serve a bound MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import Forbidden

log = logging.getLogger("sessionwatch.mcp")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


def http_app(server: Server, *, host: str = "127.0.0.1", token: str | None = None, path: str = "/mcp") -> Any:
    """The streamable-HTTP ASGI app; beyond loopback a bearer token is required."""
    if not is_loopback(host) and not token:
        raise Forbidden(f"refusing to serve MCP on non-loopback host {host!r} without a token (--http-token)")
    app: Any = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerGuard(app, token) if token else app


def run_http(server: Server, *, host: str = "127.0.0.1", port: int = 7879, token: str | None = None,
             path: str = "/mcp", log_level: str = "info") -> None:
    """Blocking: serve streamable HTTP with uvicorn at http://host:port/mcp."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    app = http_app(server, host=host, token=token, path=path)
    log_config = copy.deepcopy(LOGGING_CONFIG)
    for handler in log_config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # uvicorn's access log defaults to stdout; keep stdout clean
    log.info("MCP streamable HTTP on http://%s:%d%s", host, port, path)
    uvicorn.run(app, host=host, port=port, log_level=log_level, log_config=log_config)
