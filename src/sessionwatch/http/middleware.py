"""One pure-ASGI layer in front of every route: raw-path fix-up, bearer auth, body-size cap, access log."""

from __future__ import annotations

import hmac
import json
import logging
import time
from urllib.parse import unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import PayloadTooLarge, Unauthorized
from .endpoints import SLASH_STAND_IN
from .jsonio import JSON_TYPE, dumps

access_log = logging.getLogger("sessionwatch.http.access")

OPEN_PATHS = frozenset({"/v1/health", "/v1/health/live", "/v1/health/ready"})


def _routing_path(raw_path: bytes) -> str:
    """Decode a path segment by segment, keeping an encoded '/' (``%2F``) inside its segment.

    Session keys may contain '/'; a client sends it as %2F and the server would otherwise see an
    extra path segment. The stand-in is turned back into '/' when path parameters are read.
    """
    text = raw_path.decode("latin-1")
    return "/".join(unquote(seg).replace("/", SLASH_STAND_IN) for seg in text.split("/"))


async def _send_error(send: Send, status: int, body: dict, extra: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[type-arg]
    payload = dumps(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(payload)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": payload})


class Guard:
    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        raw_path = scope.get("raw_path")
        if raw_path and (b"%2f" in raw_path or b"%2F" in raw_path):
            scope = dict(scope, path=_routing_path(raw_path.split(b"?", 1)[0]))
        try:
            problem = self._check(scope)
            if problem is None:
                await self.app(scope, receive, send_and_note)
            else:
                status = problem.http_status
                extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
                await _send_error(send, status, problem.to_json(), extra)
        except Exception:
            status = status or 500
            raise
        finally:
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(json.dumps({
                    "method": scope["method"], "path": scope["path"], "status": status,
                    "ms": round((time.perf_counter() - started) * 1000, 3)}, ensure_ascii=False))

    def _authorized(self, header: bytes | None) -> bool:
        assert self.token is not None
        scheme, _, given = (header or b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)

    def _check(self, scope: Scope) -> Unauthorized | PayloadTooLarge | None:
        authorization = None
        length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-length":
                length = value
        if self.token is not None and scope["path"] not in OPEN_PATHS and not self._authorized(authorization):
            return Unauthorized("a valid 'Authorization: Bearer <token>' header is required")
        if length is not None:
            try:
                too_big = int(length) > self.max_body
            except ValueError:
                too_big = False  # the HTTP parser already refuses a malformed Content-Length
            if too_big:
                return PayloadTooLarge(f"request body is larger than {self.max_body} bytes")
        return None
