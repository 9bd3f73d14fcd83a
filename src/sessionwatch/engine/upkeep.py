"""Upkeep: the timer thread and ``run_due``, the restart sweep, readiness and the prune.

The prune runs hourly off the recording path (``_prune_soon``: a recording never waits for it), forced
after the restart sweep, or on demand (``prune``). With an injected clock nothing runs in the background:
tests call ``run_due(now)``.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Protocol

from ..store.records import PruneResult, WakeRequest
from .core import GatewayCore, failure_log, log

SETTINGS_REFRESH_MS = 10_000  # a running process picks up `sessionwatch settings set` within this


class Periodic(Protocol):
    """Timed work driven by ``run_due`` (the upstream monitor registers one)."""

    def due_at(self) -> int | None: ...

    def run_due(self, now: int) -> None: ...


class Upkeep(GatewayCore):
    """Timers, sweep and prune."""

    sweep_error: str | None
    sweep_ran: bool
    swept: int
    swept_at: int | None  # when this process's restart sweep last ran (the dashboard shows it)
    _settings_checked_at: int
    _prune_lock: threading.Lock
    _next_prune_at: int
    _prune_requested: bool  # a recording found the hourly prune due (see _prune_soon)
    _periodic: list[Periodic]

    # -- timers ----------------------------------------------------------------------------------
    def add_periodic(self, task: Periodic) -> None:
        self._periodic.append(task)
        self._timer_event.set()

    def run_due(self, now: int | None = None) -> None:
        """Run trailing wakes and periodic work that is due (tests with an injected clock call this)."""
        now = self.clock() if now is None else now
        self.wakes.run_due(now)
        self._run_requested_prune(now)
        for task in list(self._periodic):
            due = task.due_at()
            if due is not None and due <= now:
                try:
                    task.run_due(now)
                except Exception:  # noqa: BLE001 - one task failing must not stop the others (logged)
                    failure_log.exception("periodic task failed")
        polled: list[WakeRequest] = self._safe(lambda: self.store.poll_wakes(self.wakes.watchers()), [])
        for req in polled:
            self.wakes.request([req])
        if now - self._settings_checked_at >= SETTINGS_REFRESH_MS:
            self._refresh_data_settings(now)

    def _refresh_data_settings(self, now: int) -> None:
        """Adopt values changed by `sessionwatch settings set` while this process runs."""
        self._settings_checked_at = now
        stored: dict[str, int] = self._safe(self.store.data_settings, {})
        # field name -> value, for dataclasses.replace (every data setting is an int field)
        changes: dict[str, Any] = {n: v for n, v in stored.items() if getattr(self.settings, n, v) != v}
        if not changes:
            return
        log.warning("the store's data settings changed: %s", changes)
        self.settings = dataclasses.replace(self.settings, **changes)
        self.wakes._window = self.settings.wake_coalesce_ms  # the hub reads it per request

    def _timer_loop(self) -> None:
        while not self._closed:
            dues = [d for d in [self.wakes.next_due(), *(t.due_at() for t in self._periodic)] if d is not None]
            now = self.clock()
            wait = 1.0 if not dues else max(0.0, min(1.0, (min(dues) - now) / 1000))
            self._timer_event.wait(wait)
            self._timer_event.clear()
            if self._closed:
                return
            try:
                self.run_due()
            except Exception:  # noqa: BLE001 - the timer thread must keep running (logged)
                failure_log.exception("timer tick failed")

    def _prune_soon(self, now: int) -> None:
        """The hourly prune is due: run it off the recording path, which never waits for it.

        The timer thread runs it (``run_due``); a process without one starts a one-off thread; with an
        injected clock nothing runs in the background, so it waits for the next ``run_due``."""
        self._prune_requested = True
        if self._timer_thread is not None:
            self._timer_event.set()
        elif not self._injected_clock and not self._prune_lock.locked():
            threading.Thread(
                target=self._run_requested_prune, args=(now,), name="sessionwatch-prune", daemon=True
            ).start()

    def _run_requested_prune(self, now: int) -> None:
        if self._prune_requested and not self._closed:
            self._prune_requested = False
            self._maybe_prune(now)

    def _maybe_prune(self, now: int) -> None:
        if self.read_only:
            return
        if not self._prune_lock.acquire(blocking=False):
            return  # join the in-flight prune instead of starting another
        try:
            self._next_prune_at = now + self.settings.prune_interval_ms
            self.store.prune(
                now,
                self.settings.retention_ms,
                self.settings.max_events,
                force=False,
                interval_ms=self.settings.prune_interval_ms,
                queue_cap=self.settings.queue_cap,
            )
        except Exception:  # noqa: BLE001 - a prune is retried at the next interval (logged)
            failure_log.exception("throttled prune failed")
        finally:
            self._prune_lock.release()

    # -- maintenance -----------------------------------------------------------------------------
    def sweep(self) -> int:
        """Re-materialize unacknowledged notices (restart sweep), then a forced prune."""
        count = self._restart_sweep()
        self.prune(force=True)
        return count

    def _restart_sweep(self) -> int:
        now = self.clock()
        try:
            count, wakes = self.store.sweep(self._render, now, self.settings.queue_cap)
        except Exception as exc:  # noqa: BLE001 - readiness reports it (and retries) until a sweep succeeds
            failure_log.exception("restart sweep failed")
            self.sweep_error = f"{exc.__class__.__name__}: {exc}"[:300]
            return 0
        self.sweep_error, self.sweep_ran = None, True
        self.swept, self.swept_at = count, now
        self.wakes.request(wakes)
        return count

    def readiness(self) -> dict[str, Any]:
        """Does the store accept a write, and has the restart sweep run? (blocking: one write probe)

        A sweep that failed at open is retried here once the store takes writes again."""
        out: dict[str, Any] = {"ready": False, "writable": False}
        try:
            self.store.probe_write(self.clock())
            out["writable"] = True
        except Exception as exc:  # noqa: BLE001 - any failure is an answer: not writable, and why
            out["message"] = f"the store does not accept writes: {exc.__class__.__name__}: {exc}"[:400]
        if out["writable"] and not self.sweep_ran and not self.read_only:
            self._restart_sweep()
        if out["writable"] and not self.sweep_ran:
            out["message"] = f"the restart sweep has not run: {self.sweep_error or 'not started'}"
        out["ready"] = out["writable"] and self.sweep_ran
        out["sweepRan"] = self.sweep_ran
        out["droppedRecordings"] = self.drops.to_json()
        return out

    def prune(self, *, force: bool = True) -> PruneResult:
        return self._prune(force=force)

    def _prune(self, *, force: bool, expire_cursors: bool = True) -> PruneResult:
        now = self.clock()
        with self._prune_lock:
            self._next_prune_at = now + self.settings.prune_interval_ms
            try:
                return self.store.prune(
                    now,
                    self.settings.retention_ms,
                    self.settings.max_events,
                    force=force,
                    interval_ms=self.settings.prune_interval_ms,
                    queue_cap=self.settings.queue_cap,
                    expire_cursors=expire_cursors,
                )
            except Exception:  # noqa: BLE001 - a failed prune is skipped, retried later (logged)
                failure_log.exception("prune failed")
                return PruneResult(skipped=True)
