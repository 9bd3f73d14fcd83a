"""The embedded engine, composed: ``Gateway`` is the concerns of this package over one shared state.

Everything here is transport-free. The HTTP, MCP and CLI faces call these methods (tools through
``call_tool``), so a result is the same JSON from every face. Where each method lives:

- ``core.py``: the shared state and reads (``resolve``, ``session``, ``_host_read``, ``_safe``)
- ``sessions.py``: put, get, list, reset, delete; lifecycle reports (``lifecycle.py``)
- ``producers.py``: ``record`` (best-effort) and the host operations that record (inbound, goal, runs)
- ``messaging.py``: transcripts and the reply wait
- ``watching.py``: watches, cursors, acknowledge by target, wake subscriptions
- ``system_events.py``: the queue: enqueue, peek, drain, ack by id, leased delivery, evicted re-queue
- ``reconciliation.py``: stateVersion, changes since, the log, a watcher's read acknowledged
- ``upkeep.py``: the timer thread, the restart sweep, readiness, the prune
- ``upstream_facade.py``: catalogs, adoption, the monitor (``sessionwatch.upstream``, loaded on first use)
- ``admin.py``: stored bearer tokens and the stored data settings (the token and settings commands)

``composed.py`` composes them into ``Engine``, what the tool layer (``tools/``) runs against. This module opens
and closes it (the state every concern reads is set in ``__init__``) and runs tools.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from ..clock import Clock, system_clock
from ..notices import notice_renderer
from ..settings import Settings
from ..store import open_store
from ..store.base import Store
from . import data_settings, lifecycle
from .composed import Engine
from .core import default_store_url
from .drops import DropCounter
from .observe import NULL, Observer, SpanStore, TimedStore, Tracer
from .upkeep import Periodic
from .wakes import WakeHub

__all__ = ["Gateway", "Periodic", "default_store_url"]


class Gateway(Engine):
    """sessionwatch's engine. Open with :meth:`open`; close when done (or use ``with``)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        sweep: bool = True,
        timers: bool | None = None,
        read_only: bool = False,
        prune_on_open: bool = True,
    ) -> None:
        """``read_only``: opening and reading never write (no sweep, no prune, no timers), for read-only
        commands. ``prune_on_open=False``: no forced prune after the sweep (clients that share a store
        with a gateway). The data settings come from the store (see engine/data_settings.py)."""
        self.store = store
        self._injected_clock = clock is not None
        self.clock = clock or system_clock
        self.read_only = read_only
        try:
            self.settings = data_settings.resolve(store, settings or Settings(), self.clock(), read_only=read_only)
        except BaseException:
            store.close()
            raise
        self._settings_checked_at = self.clock()
        self.drops = DropCounter()
        self.observer = NULL  # metrics hooks (set_observer); the default does nothing
        self.tracer = None  # spans around tool calls and store operations (enable_tracing)
        self.sweep_error = None
        self.sweep_ran = False
        self._closed = False
        self._prune_lock = threading.Lock()
        self._next_prune_at = 0
        self._prune_requested = False  # a recording found the hourly prune due (see _prune_soon)
        self._timer_thread = None
        self._reply_cv = threading.Condition()
        self._periodic = []
        self._timer_event = threading.Event()
        self.wakes = WakeHub(
            self.clock, self.settings.wake_coalesce_ms, self._still_pending, on_schedule=self._timer_event.set
        )
        self._render = notice_renderer(self.settings.public_url)
        self.machine = lifecycle.this_machine()  # reported pids of this machine are checked before "lost"
        self._upstream = None
        self.swept = 0
        self.swept_at = None  # when this process's restart sweep last ran (the dashboard shows it)
        if sweep and not read_only:
            self._restart_sweep()
            if prune_on_open:  # events only: the stale-cursor slices are the hourly prune's
                self._prune(force=True, expire_cursors=False)
        if os.environ.get("SESSIONWATCH_OTEL", "").lower() in ("1", "true", "yes", "on"):
            from ..tracing import otel_tracer

            tracer = otel_tracer()  # None (logged) when OpenTelemetry is not installed
            if tracer is not None:
                self.enable_tracing(tracer)
        self.store.listen_wakes(lambda w: self.wakes.request([w]))
        self.lost_timer = None
        if not read_only:
            self.lost_timer = lifecycle.LostTimer(self)
            self._periodic.append(self.lost_timer)
        if not read_only and (timers if timers is not None else not self._injected_clock):
            self._timer_thread = threading.Thread(target=self._timer_loop, name="sessionwatch-timers", daemon=True)
            self._timer_thread.start()

    @classmethod
    def open(
        cls,
        url: str | None = None,
        clock: Clock | None = None,
        *,
        settings: Settings | None = None,
        sweep: bool = True,
        timers: bool | None = None,
        read_only: bool = False,
        prune_on_open: bool = True,
    ) -> Gateway:
        """Open a store by URL and run the restart sweep; returns once the sweep has finished.

        ``sweep=False``: no restart sweep and no prune on open (a short client such as a hook run);
        ``read_only=True`` skips every write (sweep, prune, timers); see ``__init__``."""
        return cls(
            open_store(url or default_store_url()),
            clock=clock,
            settings=settings,
            sweep=sweep,
            timers=timers,
            read_only=read_only,
            prune_on_open=prune_on_open,
        )

    def set_observer(self, observer: Observer) -> None:
        """Report recordings, deliveries, wakes, monitor ticks (and, if it asks, store timings) to ``observer``."""
        self.observer = observer
        self.wakes.observer = observer
        if observer.times_store:
            inner = self.store.inner if isinstance(self.store, TimedStore) else self.store
            self.store = TimedStore(inner, observer)  # type: ignore[assignment]

    def enable_tracing(self, tracer: Tracer) -> None:
        """Run tool calls and store operations inside spans of ``tracer`` (see sessionwatch/tracing.py)."""
        self.tracer = tracer
        self.store = SpanStore(self.store, tracer)  # type: ignore[assignment]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._upstream is not None:
            self._upstream.stop()
        self._timer_event.set()
        if self._timer_thread is not None:
            self._timer_thread.join(timeout=5)
        with self._prune_lock:  # a background prune in flight finishes its batch first
            self.store.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tools -----------------------------------------------------------------------------------
    def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        caller: str,
        agent_id: str | None = None,
        scope: frozenset[str] | None = None,
    ) -> dict[str, Any]:
        """Run one tool as ``caller``. Errors come back as ``{"error": {"code", "message"}}``.

        ``scope`` (the agent ids a scoped token covers) limits the caller and every session the tool
        touches to those agents; None is unrestricted."""
        from .tools import run_tool

        if self.tracer is None:
            return run_tool(self, name, args if args is not None else {}, caller, agent_id, scope)
        with self.tracer.span(f"sessionwatch.tool.{name}", {"sessionwatch.tool": name, "sessionwatch.caller": caller}):
            return run_tool(self, name, args if args is not None else {}, caller, agent_id, scope)
