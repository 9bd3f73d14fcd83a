"""The app's hold on the engine: opening it off the event loop, readiness, SSE streams, shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from ..engine import Gateway
from ..errors import StoreUnavailable

log = logging.getLogger("sessionwatch.http")

GatewayFactory = Callable[[], Gateway]
CLOSE = object()  # put into an SSE queue to end that stream


def redact_url(url: str) -> str:
    """A store URL without its password (health and logs show it)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}{':***' if ':' in creds else ''}@{host}"


def store_path(store: object) -> str:
    """Where a store lives, for logs: a SQLite file's absolute path, else the URL without its password."""
    path = getattr(store, "path", None)
    if isinstance(path, str) and path:
        return path if path == ":memory:" else os.path.abspath(path)
    return redact_url(str(getattr(store, "url", "")))


class Runtime:
    """Owns the Gateway when built from a factory; otherwise borrows it (the caller closes it)."""

    def __init__(
        self,
        source: Gateway | GatewayFactory,
        *,
        keepalive_s: float,
        on_open_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._factory: GatewayFactory | None = None
        self.gateway: Gateway | None = None
        if isinstance(source, Gateway) or hasattr(source, "call_tool"):
            self.gateway = source
        elif callable(source):
            self._factory = source
        else:
            raise TypeError("create_app needs a Gateway or a zero-argument callable returning one")
        self.owns = self._factory is not None
        self.keepalive_s = keepalive_s
        self.state = "ok" if self.gateway is not None else "starting"
        self.message: str | None = None
        self.error: BaseException | None = None
        self._on_open_error = on_open_error
        self._open_task: asyncio.Task[None] | None = None
        # Open SSE streams -> the agents whose sessions each is about (None: every agent, an admin's log
        # stream). A token scoped to agents is shown only the count of its own agents' streams.
        self.streams: dict[asyncio.Queue[Any], frozenset[str] | None] = {}
        self.metrics: Any = None  # http/metrics.Metrics: attached to the Gateway once it is open
        # Waiting sessions_send calls get their own thread budget, so they never starve other work.
        self.wait_limiter = anyio.CapacityLimiter(64)
        self.slow_limiter = anyio.CapacityLimiter(8)
        # Every store call runs on a worker thread (a held SQLite lock or a slow PostgreSQL must not stall
        # the event loop, so SSE keep-alives and liveness keep answering); bounded so a stalled store
        # holds at most this many threads.
        self.store_limiter = anyio.CapacityLimiter(16)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._factory is not None and self._open_task is None:
            self._open_task = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        assert self._factory is not None
        try:
            gw = await anyio.to_thread.run_sync(self._factory)
        except BaseException as exc:  # noqa: BLE001 - reported through health, never raised into the loop
            if self.state == "stopping":  # shut down while still opening (waiting for a database): no failure
                log.info("stopped before the store was open: %s", exc)
                return
            self.state, self.error = "failed", exc
            self.message = f"opening the store failed: {exc.__class__.__name__}: {exc}"
            log.error("%s", self.message)
            if self._on_open_error is not None:
                self._on_open_error(exc)
            return
        if self.state == "stopping":  # shut down while opening: close what we just opened
            await anyio.to_thread.run_sync(gw.close)
            return
        if self.metrics is not None:
            self.metrics.attach(gw)
        self.gateway, self.state = gw, "ok"
        log.info(
            "gateway ready, store %s (%d notices re-materialized by the restart sweep)", store_path(gw.store), gw.swept
        )

    def begin_shutdown(self) -> None:
        """End every SSE stream (call on the event loop) so a graceful shutdown is not held open."""
        for queue in list(self.streams):
            try:
                queue.put_nowait(CLOSE)
            except asyncio.QueueFull:
                queue.get_nowait()
                queue.put_nowait(CLOSE)

    async def stop(self) -> None:
        self.begin_shutdown()
        if self._open_task is not None and not self._open_task.done():
            self.state = "stopping"
            await asyncio.shield(self._open_task)
        gw, self.state = self.gateway, "stopping"
        if gw is not None and self.owns:
            self.gateway = None
            await anyio.to_thread.run_sync(gw.close)

    def streams_of(self, agents: frozenset[str] | None) -> int:
        """Open SSE streams about ``agents``' sessions only (None: every open stream)."""
        if agents is None:
            return len(self.streams)
        return sum(1 for about in list(self.streams.values()) if about is not None and about <= agents)

    # -- per request -----------------------------------------------------------------------------
    def token_table(self) -> Gateway | None:
        """The open engine (it looks stored tokens up), or None while starting/stopping."""
        gw = self.gateway
        return gw if gw is not None and self.state == "ok" else None

    def require(self) -> Gateway:
        gw = self.gateway
        if gw is None or self.state != "ok":
            reason = {
                "starting": self.message or "the gateway is starting (restart sweep in progress); retry shortly",
                "stopping": "the gateway is shutting down",
            }.get(self.state, self.message or "unavailable")
            raise StoreUnavailable(reason)
        return gw
