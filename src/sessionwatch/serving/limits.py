"""Connection limits that hold under abuse: header and body read timeouts and a connection cap.

uvicorn arms no timer while a request's headers or body are still arriving (``timeout_keep_alive`` only
runs *between* requests), and its ``limit_concurrency`` answers 503 only once a request's headers are
complete, so a client that sends half a header line holds a descriptor forever and is never counted.
1,100 such connections used up a 1,024-descriptor limit and the server stopped accepting. This module
closes that inside uvicorn's own HTTP protocol (a small subclass of the httptools protocol, per server):

* **header timeout**: a connection that has not sent a request's complete headers within
  ``header_timeout_s`` of its first byte (or of being opened) gets ``408`` and is closed;
* **body timeout**: a request body must be complete within ``body_timeout_s`` after its headers (a total,
  so dripping one byte at a time does not extend it); otherwise ``408`` and closed;
* **connection cap**: at ``max_connections`` open connections, a new connection first sheds the *oldest
  connection that is not in a request* (waiting for headers, or idle between keep-alive requests); only
  when every connection is busy with a request is the new one refused with ``503``. Shedding the oldest
  idle one keeps a flood of slow connections from locking real clients out: a real client's headers
  arrive in microseconds, so it is never the oldest. The cap is kept below the process's descriptor limit
  (raised to the hard limit when it is lower), so the accept loop never meets ``EMFILE``.

Used by ``serve``, ``sessionwatch node`` and ``sessionwatch mcp --transport http`` (docs/security.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive as ASGIReceiveCallable, Scope, Send as ASGISendCallable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .peer import PEER_CLOSED, probe_for
from .wire import dumps

log = logging.getLogger("sessionwatch.http")

RESERVED_FDS_MIN = 64  # descriptors kept for the store, logs, threads, outbound HTTP
MAX_BODY_BYTES = 4 * 1024 * 1024  # the gateway's default request body cap (--max-body-bytes)


@dataclass(frozen=True, slots=True)
class Limits:
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 1000
    keep_alive_s: int = 5  # idle time between requests on one connection (uvicorn's own timer)

    def __post_init__(self) -> None:
        if not self.header_timeout_s > 0 or not self.body_timeout_s > 0:
            raise ValueError("header and body timeouts must be > 0 seconds")
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")


def descriptor_budget(wanted: int) -> int:
    """The connection cap this process can hold: ``wanted``, lowered to fit RLIMIT_NOFILE minus a reserve.

    Raises the soft descriptor limit toward the hard one first (the usual practice for servers).
    """
    try:
        import resource
    except ImportError:  # not on POSIX: nothing to fit
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = max(wanted + RESERVED_FDS_MIN, -(-wanted * 8 // 7))  # leaves the reserve computed below
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    reserve = max(RESERVED_FDS_MIN, soft // 8)
    fitted = max(1, min(wanted, soft - reserve))
    if fitted < wanted:
        log.warning("connection cap lowered from %d to %d to stay below the %d-descriptor limit", wanted, fitted, soft)
    return fitted


def _response(status: int, reason: str, code: str, message: str) -> bytes:
    body = dumps({"error": {"code": code, "message": message}})
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _busy_app(cap: int) -> Any:
    payload = dumps(
        {
            "error": {
                "code": "unavailable",
                "message": f"the server is at its cap of {cap} connections, all busy; retry shortly",
            }
        }
    )

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                    (b"retry-after", b"1"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    return app


def protocol_class(limits: Limits, max_connections: int | None = None) -> type[HttpToolsProtocol]:
    """A fresh protocol class for one server (its bookkeeping is shared by that server's connections)."""
    cap = max_connections if max_connections is not None else limits.max_connections
    # Connections not in a request (waiting for headers, or idle between requests), oldest first.
    waiting: OrderedDict[Any, None] = OrderedDict()
    busy_app = _busy_app(cap)

    class GuardedHttpProtocol(HttpToolsProtocol):
        _sw_timer: asyncio.TimerHandle | None = None
        _sw_closed = False

        # -- the connection --------------------------------------------------------------------------
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap and not self._sw_shed_one():
                # Everyone is busy: read this request and answer 503 with "connection: close".
                self.app = busy_app
                log.warning("connection cap of %d reached with every connection busy; refusing one", cap)
            self._sw_wait_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._sw_closed = True
            self._sw_cancel()
            waiting.pop(self, None)
            super().connection_lost(exc)

        # -- request phases (httptools callbacks) ----------------------------------------------------
        def on_message_begin(self) -> None:
            super().on_message_begin()
            # the socket's own word on the client's close (serving/peer.py), for the delivery checks
            extensions: dict[str, Any] = dict(self.scope.get("extensions") or {})
            extensions[PEER_CLOSED] = probe_for(self.transport)
            self.scope["extensions"] = extensions
            if self._sw_timer is None:  # first byte of a later request on a kept-alive connection
                self._sw_wait_for_headers()

        def on_headers_complete(self) -> None:
            waiting.pop(self, None)
            self._sw_cancel()
            super().on_headers_complete()
            # Cancelled at once by on_message_complete when there is no body (same feed_data call).
            self._sw_arm(limits.body_timeout_s, "the request body")

        def on_message_complete(self) -> None:
            self._sw_cancel()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self._sw_closed and not self.transport.is_closing():
                waiting[self] = None  # idle until the next request (uvicorn's keep-alive timer runs)

        # -- helpers ---------------------------------------------------------------------------------
        def _sw_wait_for_headers(self) -> None:
            waiting[self] = None
            waiting.move_to_end(self)
            self._sw_arm(limits.header_timeout_s, "the request headers")

        def _sw_arm(self, seconds: float, what: str) -> None:
            self._sw_cancel()
            self._sw_timer = self.loop.call_later(seconds, self._sw_timed_out, what, seconds)

        def _sw_cancel(self) -> None:
            if self._sw_timer is not None:
                self._sw_timer.cancel()
                self._sw_timer = None

        def _sw_timed_out(self, what: str, seconds: float) -> None:
            self._sw_timer = None
            self._sw_close(408, "Request Timeout", "invalid_argument", f"{what} did not arrive within {seconds:g} s")

        def _sw_close(self, status: int, reason: str, code: str, message: str) -> None:
            if self._sw_closed or self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:
                self.transport.write(_response(status, reason, code, message))
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False
            waiting.pop(self, None)
            self.transport.close()

        def _sw_shed_one(self) -> bool:
            """Close the oldest connection that is not in a request; False when there is none."""
            for victim in list(waiting):
                if victim is self:
                    continue
                if victim.transport.is_closing():
                    waiting.pop(victim, None)  # already on its way out: it frees its descriptor anyway
                    return True
                if victim.cycle is not None and not victim.cycle.response_complete:
                    continue  # a pipelined request is in progress on it: busy
                if victim._sw_timer is not None:  # a request has begun (or is awaited) but its headers are not in
                    victim._sw_close(
                        408,
                        "Request Timeout",
                        "invalid_argument",
                        f"closed to make room: the server is at its cap of {cap} connections "
                        "and this one had not sent a complete request",
                    )
                else:
                    waiting.pop(victim, None)
                    victim.transport.close()  # idle between requests: nothing to answer
                return True
            return False

    return GuardedHttpProtocol


def uvicorn_config(
    app: Any, *, host: str, port: int, limits: Limits | None = None, cap: int | None = None, **kwargs: Any
) -> Any:
    """A ``uvicorn.Config`` serving ``app`` with the guarded protocol and the limits above. ``cap``: the
    connection cap when the caller already fitted it with ``descriptor_budget`` (the token gate needs it)."""
    import uvicorn

    limits = limits or Limits()
    cap = cap if cap is not None else descriptor_budget(limits.max_connections)
    from ..logformat import uvicorn_log_config

    if uvicorn_log_config() is not None:  # --log-format json: uvicorn's own lines are JSON too
        kwargs["log_config"] = uvicorn_log_config()
    kwargs.setdefault("ws", "none")  # no WebSocket routes: an upgrade request stays plain HTTP, under our timers
    return uvicorn.Config(
        app, host=host, port=port, http=protocol_class(limits, cap), timeout_keep_alive=limits.keep_alive_s, **kwargs
    )
