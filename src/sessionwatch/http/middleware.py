"""One pure-ASGI layer in front of every route: raw-path fix-up, bearer auth, per-token limits, body-size
cap, access log.

Bearer auth resolves the token to a principal (``auth.Authenticator``) and hands it to the routes in the
ASGI scope; what that principal may touch is decided per route (``auth.authorize``). A request made with
a stored token then runs under the token gate (``serving/tokengate.py``): its token's limits on streams
and requests in progress, and the end of the request once the token is revoked."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InvalidArgument, PayloadTooLarge, SessionwatchError
from ..logformat import REQUEST_ID
from ..serving.tokengate import TokenGate, authorization_of
from .auth import PRINCIPAL, Authenticator
from .dashboard import is_asset_path
from .jsonio import JSON_TYPE, dumps
from .paths import SLASH_STAND_IN

access_log = logging.getLogger("sessionwatch.http.access")

OPEN_PATHS = frozenset({"/v1/health", "/v1/health/live", "/v1/health/ready"})
STREAM_PATHS = frozenset({"/v1/stream", "/v1/events/stream"})  # Server-Sent Events: they stay open
_GIVEN_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")  # a caller's X-Request-Id is kept only when plain


def request_id(scope: Scope) -> str:
    """The caller's ``X-Request-Id`` when it is short and plain (a proxy's id ties the logs together),
    else a new random one."""
    for name, value in scope["headers"]:
        if name == b"x-request-id" and _GIVEN_ID.match(value):
            return value.decode("ascii")
    return os.urandom(8).hex()  # 64 random bits; a quarter of uuid4's cost per request


def _routing_path(raw_path: bytes) -> str:
    """Decode a path segment by segment, keeping an encoded '/' (``%2F``) inside its segment.

    Session keys may contain '/'; a client sends it as %2F and the server would otherwise see an
    extra path segment. The stand-in is turned back into '/' when path parameters are read.
    Raises UnicodeDecodeError when the decoded bytes are not UTF-8 (never a U+FFFD key).
    """
    return "/".join(unquote_to_bytes(seg).decode("utf-8").replace("/", SLASH_STAND_IN) for seg in raw_path.split(b"/"))


def _valid_query(query: bytes) -> bool:
    """Percent-decoded, is the query string UTF-8? ('+' and '&' are ASCII: they cannot change that.)"""
    try:
        unquote_to_bytes(query).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


async def _send_error(send: Send, status: int, body: dict[str, Any], extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    payload = dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(payload)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class Guard:
    def __init__(
        self, app: ASGIApp, *, auth: Authenticator, max_body_bytes: int, gate: TokenGate | None = None
    ) -> None:
        self.app = app
        self.auth = auth
        self.max_body = max_body_bytes
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        rid = request_id(scope)
        rid_token = REQUEST_ID.set(rid)  # log records emitted while serving this request carry it
        rid_header = (b"x-request-id", rid.encode())

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = dict(message, headers=[*message.get("headers", ()), rid_header])
            await send(message)

        raw_path = scope.get("raw_path")
        bad_utf8 = False
        if raw_path and b"%" in raw_path:  # decoded again, strictly: the server's decoding replaces bad bytes
            try:
                scope = dict(scope, path=_routing_path(raw_path.split(b"?", 1)[0]))
            except UnicodeDecodeError:
                bad_utf8 = True
        query = scope.get("query_string", b"")
        if query and (b"%" in query or not query.isascii()) and not _valid_query(query):
            bad_utf8 = True
        gate, hold = self.gate, None
        try:
            problem: SessionwatchError | None = None
            if bad_utf8:
                problem = InvalidArgument("the request path or query is not percent-encoded UTF-8")
            problem = problem or await self._authenticate(scope) or self._check(scope)
            if problem is None and gate is not None and PRINCIPAL in scope:
                try:
                    hold = gate.admit(scope[PRINCIPAL], stream=scope["path"] in STREAM_PATHS)
                except SessionwatchError as exc:
                    problem = exc
            if problem is None:
                if gate is None or hold is None:
                    await self.app(scope, receive, send_and_note)
                else:
                    await gate.serve(hold, self.app, scope, receive, send_and_note)
            else:
                status = problem.http_status
                extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
                if problem.retry_after_s is not None:
                    extra.append((b"retry-after", str(problem.retry_after_s).encode()))
                await _send_error(send, status, problem.to_json(), [*extra, rid_header])
        except Exception:
            status = status or 500
            raise
        finally:
            if gate is not None and hold is not None:
                gate.release(hold)
            if access_log.isEnabledFor(logging.INFO):
                fields = {
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "ms": round((time.perf_counter() - started) * 1000, 3),
                    "requestId": rid,
                }
                access_log.info(json.dumps(fields, ensure_ascii=False), extra={"fields": fields})
            REQUEST_ID.reset(rid_token)

    async def _authenticate(self, scope: Scope) -> SessionwatchError | None:
        """Resolve the bearer token into ``scope[PRINCIPAL]``; the error to answer with when refused."""
        try:
            header = authorization_of(scope["headers"])
        except SessionwatchError as exc:
            return exc
        if scope["path"] in OPEN_PATHS:  # no token needed; one that comes along decides what health shows
            if header is not None or not self.auth.enabled:
                try:
                    scope[PRINCIPAL] = await self.auth.resolve(header)
                except SessionwatchError:
                    pass  # a probe is answered whatever its header: without the figures a token would show
            return None
        if is_asset_path(scope["path"]):  # the dashboard's files hold no data
            return None
        try:
            scope[PRINCIPAL] = await self.auth.resolve(header)
        except SessionwatchError as exc:
            return exc
        return None

    def _check(self, scope: Scope) -> PayloadTooLarge | None:
        length = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
        if length is not None:
            try:
                too_big = int(length) > self.max_body
            except ValueError:
                too_big = False  # the HTTP parser already refuses a malformed Content-Length
            if too_big:
                return PayloadTooLarge(f"request body is larger than {self.max_body} bytes")
        return None
