"""The bound session's pending notices as an MCP resource, with change pushes to subscribers.

Reading the resource is a peek: it never acknowledges anything (notices are still delivered, and
acknowledged, through tool results). A subscribed client gets ``notifications/resources/updated``
whenever the list of pending notices changes, without calling a tool:

- on the 2025 protocol through ``resources/subscribe``; on 2026-07-28 through a ``subscriptions/listen``
  stream that names the resource URI (the SDK's ``ListenHandler`` over a subscription bus);
- a change is *detected* by re-peeking the queue and comparing it with what subscribers last saw. A
  re-peek runs when a wake arrives (local ``Gateway.subscribe_wakes``, which crosses processes on
  PostgreSQL through the store's LISTEN connection; or the remote gateway's SSE wake stream with
  ``--gateway``), after each tool call of this server, and every ``poll_interval`` seconds while
  anyone is subscribed. The poll is what makes a write by another process on a shared SQLite file
  visible (SQLite has no cross-process wake path), and it also covers notices that request no wake
  (subagent watchers, ambient group notices, wakes coalesced into a trailing one).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from ..repeats import RepeatedFailures
from .binding import SessionBinding
from .routing import RoutedBinding
from .texts import NOTICES_MIME, notices_resource_json, notices_uri

log = logging.getLogger("sessionwatch.mcp")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

DEFAULT_POLL_INTERVAL = 1.0
MIME = NOTICES_MIME


class NoticeFeed:
    """One per MCP server: the resource of its bound session and the subscriptions on it."""

    def __init__(
        self, binding: SessionBinding | RoutedBinding, *, poll_interval: float = DEFAULT_POLL_INTERVAL
    ) -> None:
        self.binding = binding
        self.poll_interval = poll_interval
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._legacy: set[Any] = set()  # ServerSessions subscribed with resources/subscribe
        self._listeners = 0  # open subscriptions/listen streams that asked for self.uri
        self._seen: tuple[tuple[Any, ...], ...] | None = None  # what subscribers last saw
        self._kick = threading.Event()
        self._wakes_started = False
        self._stop = threading.Event()
        self._unsubscribe: Callable[[], None] | None = None
        self.published = 0  # updates sent (tests and logs)

    # -- the resource ----------------------------------------------------------------------------
    @property
    def uri(self) -> str:
        """The bound session's notices (a server bound late has none before its first call)."""
        key = self.binding.session_key
        return notices_uri(key) if key else "sessionwatch://sessions/unbound/notices"

    def resource(self) -> types.Resource:
        """The resource as listed (only while the server knows its session)."""
        assert self.binding.session_key is not None
        return types.Resource.model_validate(notices_resource_json(self.binding.session_key))

    def peek(self) -> list[dict[str, Any]]:
        """The pending entries; raises when the store or gateway cannot be read (never an empty success)."""
        if self.binding.session_key is None:
            return []
        return list(self.binding.backend.peek_system_events(self.binding.session_key, agent_id=self.binding.agent_id))

    def _check_uri(self, uri: str) -> None:
        if self.binding.session_key is None:
            raise MCPError(INVALID_PARAMS, f"unknown resource {uri!r}; this server does not know its session yet")
        if uri != self.uri:
            raise MCPError(INVALID_PARAMS, f"unknown resource {uri!r}; this server serves {self.uri!r}")

    async def read(self, uri: str) -> types.ReadResourceResult:
        self._check_uri(uri)
        try:
            entries = await anyio.to_thread.run_sync(self.peek)
        except Exception as exc:  # noqa: BLE001 - any failed read is the client's error answer (logged)
            failure_log.exception("reading the notices of %s failed", self.binding.session_key)
            raise MCPError(INTERNAL_ERROR, f"cannot read the pending notices: {exc}") from None
        body = {"sessionKey": self.binding.session_key, "entries": entries}
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=self.uri, mime_type=MIME, text=json.dumps(body, ensure_ascii=False))
            ]
        )

    # -- subscriptions ---------------------------------------------------------------------------
    @property
    def interested(self) -> bool:
        return bool(self._legacy) or self._listeners > 0

    async def _baseline(self) -> None:
        """Remember the current list before the first subscriber is acknowledged: later changes push."""
        if self._seen is None:
            try:
                self._seen = _fingerprint(await anyio.to_thread.run_sync(self.peek))
            except Exception:  # noqa: BLE001 - the poll sees the notices later (logged)
                failure_log.exception("peeking the notices of %s failed", self.binding.session_key)
        self._start_wakes()
        self._kick.set()

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self._check_uri(params.uri)
        await self._baseline()
        self._legacy.add(ctx.session)
        self._kick.set()
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._legacy.discard(ctx.session)
        self._kick.set()
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): the SDK's handler, counting streams that want our URI."""
        wants = self.uri in (params.notifications.resource_subscriptions or ())
        if wants:
            await self._baseline()
            self._listeners += 1
        try:
            return await self._listen(ctx, params)
        finally:
            if wants:
                self._listeners -= 1

    def kick(self) -> None:
        """Re-peek soon (a wake arrived, or a tool call may have delivered notices)."""
        self._kick.set()

    # -- wake sources ----------------------------------------------------------------------------
    def _start_wakes(self) -> None:
        key = self.binding.session_key
        if self._wakes_started or key is None:
            return
        self._wakes_started = True
        backend = self.binding.backend
        try:
            subscribe_wakes = getattr(backend, "subscribe_wakes", None)
            if subscribe_wakes is not None:  # a local Gateway: its store carries cross-process wakes on PostgreSQL
                self._unsubscribe = subscribe_wakes(key, lambda wake: self._kick.set())
            elif getattr(backend, "stream_wakes", None) is not None:  # a remote gateway: its SSE wake stream
                threading.Thread(target=self._stream_wakes, name="sessionwatch-mcp-wakes", daemon=True).start()
        except Exception:  # noqa: BLE001 - the poll still sees every change, only later
            failure_log.exception("subscribing to wakes of %s failed", key)

    def _stream_wakes(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                for _wake in self.binding.backend.stream_wakes(self.binding.session_key):  # type: ignore[attr-defined]
                    self._kick.set()
                    backoff = 1.0
                    if self._stop.is_set():
                        return
            except Exception as exc:  # noqa: BLE001 - reconnect: the poll covers the gap
                log.debug("wake stream of %s ended: %s", self.binding.session_key, exc)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)

    # -- the loop --------------------------------------------------------------------------------
    async def run(self) -> None:
        """Detect changes and publish them, until cancelled (runs for the server's lifetime)."""
        while not self._stop.is_set():
            wait = self.poll_interval if self.interested and self.poll_interval > 0 else None
            await anyio.to_thread.run_sync(self._kick.wait, wait, abandon_on_cancel=True)
            self._kick.clear()
            if not self.interested:
                self._seen = None  # a new first subscriber takes a fresh baseline
                continue
            try:
                now = _fingerprint(await anyio.to_thread.run_sync(self.peek))
            except Exception:  # noqa: BLE001 - the next poll tries again (logged)
                failure_log.exception("peeking the notices of %s failed", self.binding.session_key)
                continue
            if now != self._seen:
                self._seen = now
                await self._publish()

    async def _publish(self) -> None:
        self.published += 1
        log.debug("notices of %s changed: resources/updated %s", self.binding.session_key, self.uri)
        await self.bus.publish(ResourceUpdated(uri=self.uri))
        for session in list(self._legacy):
            try:
                await session.send_resource_updated(self.uri)
            except Exception:  # noqa: BLE001 - the client went away: forget its subscription
                self._legacy.discard(session)

    def close(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            except Exception:  # noqa: BLE001 - closing is best-effort
                pass
            self._unsubscribe = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the loop beside the server (used as the server's lifespan)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run)
            try:
                yield
            finally:
                self.close()
                tg.cancel_scope.cancel()


def _fingerprint(entries: list[dict[str, Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple((e.get("id"), e.get("ts"), e.get("text")) for e in entries)
