"""Watching: cursors (who watches whom), acknowledgment by target, and wake subscriptions."""

from __future__ import annotations

from typing import Any

from ..keys import is_subagent_key, parse_key
from ..notices import context_key_for, target_from_context_key
from .core import GatewayCore, failure_log
from .wakes import Subscription, Wake, WakeCallback


class Watching(GatewayCore):
    """Watch registrations, cursors and wakes."""

    # -- watches, notices, queue -----------------------------------------------------------------
    def _register(self, watcher: str, target: str, target_agent: str, provenance: str) -> bool:
        try:
            return self.store.register_watch(watcher, target, target_agent, provenance, self.clock())
        except Exception:  # noqa: BLE001 - a watch registration is best-effort (logged)
            failure_log.exception("watch registration %s -> %s failed", watcher, target)
            return False

    def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool:
        """Explicit watch (what ``sessions_send watch: true`` does), seeded at the target's head."""
        w = parse_key(watcher, "watcher")
        t, agent = self.resolve(target, agent_id, what="target")
        return self._register(w.raw, t, agent, "explicit")

    def unwatch(self, watcher: object, target: object) -> bool:
        return self._unwatch(parse_key(watcher, "watcher").raw, parse_key(target, "target").raw)

    def _unwatch(self, watcher: str, target: str) -> bool:
        """Unwatch validated keys (the tool's target exists, so it may be a key stored before; parse_key)."""
        return self.store.unwatch(watcher, target, context_key_for(target), self.clock(), self.settings.queue_cap)

    def cursors(self, *, watcher: object = None, target: object = None) -> list[dict[str, Any]]:
        w = parse_key(watcher, "watcher").raw if watcher is not None else None
        t = parse_key(target, "target").raw if target is not None else None
        return [c.to_json() for c in self._host_read(lambda: self.store.cursors(w, t), "reading cursors")]

    def acknowledge(self, watcher: object, targets: list[str]) -> int:
        """Acknowledge pending notices of ``watcher`` for ``targets`` (what a drain does for its entries)."""
        w = parse_key(watcher, "watcher").raw
        try:
            wakes = self.store.acknowledge(w, targets, self._render, self.clock(), self.settings.queue_cap)
        except Exception:  # noqa: BLE001 - an acknowledge is retried by the next read (logged)
            failure_log.exception("acknowledge for %s failed", w)
            return 0
        self.observer.notices_acknowledged(len(targets))
        self.observer.notices_reopened(len(wakes))
        self.wakes.request(wakes)
        return len(targets)

    def subscribe_wakes(self, key: object, callback: WakeCallback) -> Subscription:
        """Call ``callback(Wake)`` for wakes of watcher ``key``; returns an unsubscribe handle.

        The callback runs on the thread that committed the notice (or the timer thread): keep it short
        and thread-safe.
        """
        return self.wakes.subscribe(parse_key(key, "sessionKey").raw, callback)

    def pending_wake(self, key: object) -> Wake | None:
        """The wake a subscriber that (re)connects gets at once when a waking notice is already queued for
        watcher ``key`` (a wake sent while it was away is not lost); None when nothing is pending.
        Blocking: one queue read."""
        watcher = parse_key(key, "sessionKey").raw
        if is_subagent_key(watcher):
            return None  # subagent watchers are never woken (their parent is)
        entries = self._host_read(
            lambda: self.store.peek(watcher, self._render, self.settings.queue_cap), "reading the system-event queue"
        )
        targets = [e.target or target_from_context_key(e.context_key) for e in entries if not e.queue_only]
        pending = [t for t in targets if t]
        if not pending:
            return None
        target = pending[-1]  # the newest
        return Wake(watcher, target, f"session-state:{target}", self.clock())
