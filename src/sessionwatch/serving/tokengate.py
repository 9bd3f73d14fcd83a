"""Per-token limits and revocation, for the servers that accept the store's tokens (the gateway and
``sessionwatch mcp --transport http``).

A request in progress holds a connection busy, and a busy connection is the one kind the connection cap
cannot shed (serving/limits.py), so one token with many open streams could lock every other client out.
Here each scoped token gets its own share:

* at most ``streams`` open streams and ``connections`` requests in progress (its streams included);
  beyond either, that token alone gets ``429 rate_limited`` with ``Retry-After``. On a small server each
  is lowered to half of what scoped tokens may hold together, so one token never takes all of it;
* all scoped tokens together keep at most ``connections - admin_reserve`` requests in progress (the
  reserve is at most half the cap), so an admin always finds room; a scoped request beyond that gets
  ``503 unavailable``.

Admin principals (the server's own ``--token``, admin tokens of the store, a tokenless loopback server)
are not limited: the operator's tools must get in while something else misbehaves.

Revocation: every request made with a stored token is a *hold* on that token, and so is an MCP session.
Every ``revocation_poll_s`` the gate reads the rows of the tokens that hold something (one read per
token, on one worker thread) and ends the holds of a token that was revoked or deleted: a request in
progress is cancelled (a stream ends cleanly; a request not yet answered gets 401) and an MCP session
is terminated. A token row that cannot be read leaves its holds alone until a read succeeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..access import Principal
from ..errors import InvalidArgument, RateLimited, SessionwatchError, StoreUnavailable, Unauthorized
from ..repeats import RepeatedFailures
from .wire import JSON_TYPE, dumps

log = logging.getLogger("sessionwatch.http.tokens")
failure_log = RepeatedFailures(log)

STREAM_RETRY_S = 10  # a stream frees its slot only when it ends: no point asking again within a second
REQUEST_RETRY_S = 1

# token id -> is the token still live? None: cannot tell now (the store is not open); raises on a failed read
Lookup = Callable[[str], bool | None]


@dataclass(frozen=True, slots=True)
class TokenLimits:
    streams: int = 64  # open streams per scoped token
    connections: int = 128  # requests in progress per scoped token (its streams included)
    admin_reserve: int = 100  # connections scoped tokens together never get (at most half the cap)
    revocation_poll_s: float = 2.0  # how often the rows of tokens holding something are read again

    def __post_init__(self) -> None:
        if self.streams < 1 or self.connections < 1:
            raise ValueError("the per-token stream and connection limits must be >= 1")
        if self.admin_reserve < 0:
            raise ValueError("the admin reserve must be >= 0")
        if not self.revocation_poll_s > 0:
            raise ValueError("the revocation poll interval must be > 0 seconds")


class Hold:
    """One request in progress (or one MCP session) made with a stored token."""

    __slots__ = ("cut", "end", "limited", "stream", "token_id")

    def __init__(self, token_id: str, *, stream: bool, limited: bool) -> None:
        self.token_id = token_id
        self.stream = stream
        self.limited = limited
        self.cut = False  # the token was revoked: end() was (or is about to be) called
        self.end: Callable[[], Any] | None = None


class TokenGate:
    """The limits and holds of one server (its event loop's bookkeeping; not thread-safe)."""

    def __init__(self, limits: TokenLimits | None, connections: int, lookup: Lookup | None) -> None:
        self.limits = limits or TokenLimits()
        self.pool = max(1, connections - min(self.limits.admin_reserve, connections // 2))
        self.max_connections = min(self.limits.connections, max(1, self.pool // 2))
        self.max_streams = min(self.limits.streams, self.max_connections)
        self.lookup = lookup
        self._counts: dict[str, list[int]] = {}  # token id -> [requests in progress, streams open]
        self._scoped = 0  # requests in progress of every scoped token
        self._holds: dict[str, set[Hold]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._endings: set[asyncio.Task[None]] = set()
        self._limiter = anyio.CapacityLimiter(1)  # token reads never take threads from requests

    # -- admission ---------------------------------------------------------------------------------
    def admit(self, principal: Principal, *, stream: bool) -> Hold | None:
        """A hold for this request, or None when there is nothing to limit or revoke (no stored token).

        Raises RateLimited (this token is at its own limit) or StoreUnavailable (the room for scoped
        tokens is used up)."""
        token_id = principal.token_id
        if token_id is None:
            return None
        limited = not principal.admin
        if limited:
            counts = self._counts.get(token_id, [0, 0])
            if stream and counts[1] >= self.max_streams:
                raise RateLimited(
                    f"this token has {counts[1]} streams open, as many as one token may "
                    "(--max-token-streams); end one, or retry later",
                    STREAM_RETRY_S,
                )
            if counts[0] >= self.max_connections:
                raise RateLimited(
                    f"this token has {counts[0]} requests in progress, as many as one token may "
                    "(--max-token-connections); retry shortly",
                    STREAM_RETRY_S if stream else REQUEST_RETRY_S,
                )
            if self._scoped >= self.pool:
                raise StoreUnavailable(
                    f"the server's {self.pool} connections for scoped tokens are all busy; retry shortly"
                )
            counts[0] += 1
            counts[1] += stream
            self._counts[token_id] = counts
            self._scoped += 1
        return self._add(Hold(token_id, stream=stream, limited=limited))

    def hold_session(self, token_id: str, end: Callable[[], Coroutine[Any, Any, None]]) -> Hold:
        """An MCP session opened with ``token_id``: ``end`` terminates it when the token is revoked."""
        hold = Hold(token_id, stream=False, limited=False)

        def start_ending() -> None:
            task: asyncio.Task[None] = asyncio.get_running_loop().create_task(end())
            self._endings.add(task)  # a reference until it is done (the loop keeps only a weak one)
            task.add_done_callback(self._endings.discard)

        hold.end = start_ending
        return self._add(hold)

    def _add(self, hold: Hold) -> Hold:
        self._holds.setdefault(hold.token_id, set()).add(hold)
        if self.lookup is not None and (self._poller is None or self._poller.done()):
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        return hold

    def release(self, hold: Hold) -> None:
        holds = self._holds.get(hold.token_id)
        if holds is not None:
            holds.discard(hold)
            if not holds:
                del self._holds[hold.token_id]
        if hold.limited:
            hold.limited = False  # released once
            counts = self._counts[hold.token_id]
            counts[0] -= 1
            counts[1] -= hold.stream
            self._scoped -= 1
            if counts[0] <= 0:
                del self._counts[hold.token_id]

    # -- serving a request under its hold --------------------------------------------------------------
    async def serve(self, hold: Hold, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run ``app`` for this request; when the token is revoked meanwhile, cancel it and end the answer
        cleanly: the last chunk of a stream that started, or 401 for a request not answered yet."""
        started = done = False

        async def noting(message: Message) -> None:
            nonlocal started, done
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                done = True
            await send(message)

        with anyio.CancelScope() as cancel:
            hold.end = cancel.cancel
            if hold.cut:  # revoked between admission and now
                cancel.cancel()
            await app(scope, receive, noting)
        if not cancel.cancelled_caught or done:
            return
        try:
            if started:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await send_refusal(send, Unauthorized("the bearer token was revoked"))
        except OSError:  # the client is gone too
            pass

    # -- revocation ---------------------------------------------------------------------------------
    def revoke(self, token_id: str) -> int:
        """End every hold of ``token_id`` now; how many there were."""
        holds = self._holds.pop(token_id, set())
        for hold in holds:
            hold.cut = True
            if hold.end is not None:
                hold.end()
        if holds:
            log.info("token %s was revoked: ended %d of its requests, streams and sessions", token_id, len(holds))
        return len(holds)

    async def _poll(self) -> None:
        assert self.lookup is not None
        lookup = self.lookup
        while self._holds:
            await asyncio.sleep(self.limits.revocation_poll_s)
            for token_id in list(self._holds):
                try:
                    live = await anyio.to_thread.run_sync(lookup, token_id, limiter=self._limiter)
                except SessionwatchError as exc:
                    failure_log.warning("re-reading a token for revocation failed: %s", exc.message, key=exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - the holds stay until a read succeeds
                    failure_log.warning(
                        "re-reading a token for revocation failed: %s: %s", exc.__class__.__name__, exc, key=exc
                    )
                    continue
                if live is False:
                    self.revoke(token_id)


async def send_refusal(send: Send, exc: SessionwatchError, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """``exc`` as a JSON error answer, with ``Retry-After`` when it says when to retry (refusals made
    before any route runs)."""
    payload = dumps(exc.to_json())
    headers = [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(payload)).encode())]
    if exc.retry_after_s is not None:
        headers.append((b"retry-after", str(exc.retry_after_s).encode()))
    if exc.http_status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": exc.http_status, "headers": [*headers, *(extra or [])]})
    await send({"type": "http.response.body", "body": payload})


def authorization_of(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The request's ``Authorization`` header; InvalidArgument when it has more than one.

    Servers and proxies disagree on which of two copies counts (the first, the last, both joined), so
    a request that sends two could be checked as one caller and served as another: it is refused."""
    found: bytes | None = None
    for name, value in headers:
        if name == b"authorization":
            if found is not None:
                raise InvalidArgument("a request may carry one Authorization header, not several")
            found = value
    return found
