"""``GET /v1/stream?sessionKey=...``: wakes for one watcher as Server-Sent Events.

Each wake is ``event: wake`` with JSON ``{watcher, target, reason, at, trailing}`` and an ``id:`` (a number
that only grows within one gateway process); the stream opens with a ``retry:`` hint for reconnecting
clients. Wakes are not stored, so nothing is replayed by ``Last-Event-ID``: instead, a client that
connects or reconnects while a waking notice is already queued for its watcher gets one wake at once
(a wake sent while it was away is not lost). A comment line (``: keep-alive``) goes out every
``keepalive_s`` so proxies and clients see a live connection.
The engine calls the wake callback on whichever thread committed the notice; the callback only hands
the wake to this connection's queue on the event loop, so subscribers never slow recording.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

import anyio.to_thread
from starlette.types import Receive, Scope, Send

from ..engine import Gateway, Wake
from ..errors import InvalidArgument
from ..keys import agent_of, parse_key
from ..repeats import RepeatedFailures
from . import schemas
from .auth import sessions
from .endpoints import Call, Endpoint
from .jsonio import dumps
from .runtime import CLOSE, Runtime

log = logging.getLogger("sessionwatch.http.sse")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

QUEUE_SIZE = 256  # wakes coalesce per watcher, so a full queue means a stuck client: drop, never block
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


RETRY_MS = 2000  # the reconnect delay a client should use after a drop
_ids = itertools.count(1)  # wake ids: unique within this process (next() is atomic under the GIL)


def format_wake(wake: dict[str, Any]) -> bytes:
    return b"id: %d\nevent: wake\ndata: " % next(_ids) + dumps(wake) + b"\n\n"


class WakeStream:
    """An ASGI response that subscribes on creation and unsubscribes when the stream ends."""

    def __init__(self, gw: Gateway, runtime: Runtime, key: str) -> None:
        self.gw = gw
        self.key = key
        self.runtime = runtime
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_SIZE)
        runtime.streams[self.queue] = frozenset({agent_of(key) or ""})
        # Subscribed before the response starts: once a client sees the headers, no wake is missed.
        self.sub = gw.subscribe_wakes(key, self._on_wake)

    def _put(self, item: Any) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            log.warning("dropping a wake for %s: its SSE client is not reading", self.key)

    def _on_wake(self, wake: Wake) -> None:
        item = wake.to_json()
        if threading.get_ident() == self.loop_thread:
            self._put(item)
        else:
            try:
                self.loop.call_soon_threadsafe(self._put, item)
            except RuntimeError:  # the loop is closed: the server is gone
                pass

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.queue.put_nowait(CLOSE) if not self.queue.full() else None
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.get_running_loop().create_task(self._watch_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            await send(
                {
                    "type": "http.response.body",
                    "more_body": True,
                    "body": f"retry: {RETRY_MS}\n: subscribed {self.key}\n\n".encode(),
                }
            )
            await self._pending_wake()
            while True:
                try:
                    item = await asyncio.wait_for(self.queue.get(), self.runtime.keepalive_s)
                except TimeoutError:
                    await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                    continue
                if item is CLOSE or watcher.done():
                    break
                await send({"type": "http.response.body", "body": format_wake(item), "more_body": True})
            if not watcher.done():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-write
            pass
        finally:
            self.close()
            watcher.cancel()

    async def _pending_wake(self) -> None:
        """A notice queued before this connection opened wakes it once, now (subscribed first, so a
        notice committed meanwhile wakes it through the hub instead: then this one is skipped)."""
        try:
            wake = await anyio.to_thread.run_sync(self.gw.pending_wake, self.key, limiter=self.runtime.store_limiter)
        except Exception as exc:  # noqa: BLE001 - the stream still works; the next notice wakes it
            failure_log.warning("checking %s for a pending notice failed: %s", self.key, exc)
            return
        if wake is not None and self.queue.empty():
            self._put(wake.to_json())
            self.gw.observer.wake_sent(False, 1)

    def close(self) -> None:
        self.sub.close()
        self.runtime.streams.pop(self.queue, None)


def _stream(c: Call) -> WakeStream:
    key = parse_key(c.query.get("sessionKey"), "sessionKey")
    if not key.qualified:
        raise InvalidArgument("only an agent-qualified session ('agent:<agentId>:<rest>') gets wakes")
    return WakeStream(c.gw, c.runtime, key.raw)


async def _open_stream(c: Call) -> WakeStream:
    return _stream(c)


ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/stream",
        "stream_wakes",
        "Server-Sent Events: wakes for one watcher session.",
        _open_stream,
        tag="wakes",
        query={"sessionKey": schemas.KEY},
        required_query=("sessionKey",),
        touches=sessions("query:sessionKey"),
    ),
]
