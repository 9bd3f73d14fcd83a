"""Reconciliation: what changed since a sequence (``session_status`` with ``changesSince``), the log for
tailing, and the cursor move a watcher's own read makes (``Store.reconcile``)."""

from __future__ import annotations

from typing import Any

from .. import validation
from ..keys import is_agent_qualified
from ..store.records import ChangesPage, LogBounds
from .core import GatewayCore, failure_log


class Reconciliation(GatewayCore):
    """Reads of the signal log, and the acknowledgment a watcher's read makes."""

    def reconcile(self, watcher: str, target: str, after: int, last: int) -> None:
        """``watcher`` read ``target``'s changes (after, last]: move its cursor and withdraw what the read
        covered (beyond v1; ``Settings.reconcile_acknowledges``). Best-effort: the read stands anyway."""
        if not self.settings.reconcile_acknowledges or not is_agent_qualified(watcher) or watcher == target:
            return
        try:
            wakes = self.store.reconcile(
                watcher, target, after, last, self._render, self.clock(), self.settings.queue_cap
            )
        except Exception:  # noqa: BLE001 - the read stands without its acknowledgement (logged)
            failure_log.exception("acknowledging %s's read of %s failed (the read stands)", watcher, target)
            return
        self.wakes.request(wakes)

    # -- reconciliation --------------------------------------------------------------------------
    def state_version(self, key: object, agent_id: object = None) -> int:
        skey, agent = self.resolve(key, agent_id, stored=True)  # a read: finds a key stored before (parse_key)
        return int(self._host_read(lambda: self.store.state_version(skey, agent), "reading the stateVersion"))

    def changes_since(
        self, key: object, after: object, *, agent_id: object = None, limit: int | None = None
    ) -> ChangesPage:
        skey, agent = self.resolve(key, agent_id, stored=True)  # a read, as state_version
        after = validation.sequence(after, "changesSince")
        page = self.settings.changes_page_size
        lim = page if limit is None else max(1, min(page, int(limit)))
        return self._host_read(lambda: self.store.changes_since(skey, agent, after, lim), "reading changes")

    def events_after(
        self, after: object = 0, limit: object = 200, *, agents: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        """The whole signal log after a sequence (every session), full payloads: for tailing.
        ``agents`` given: only those agents' events (a scoped token's view)."""
        a = validation.sequence(after, "after")
        n = validation.integer(limit, "limit", minimum=1, maximum=1000)
        if agents is None:
            return [e.to_json() for e in self._host_read(lambda: self.store.events_after(a, n), "reading the log")]
        return [
            e.to_json()
            for e in self._host_read(lambda: self.store.events_after(a, n, sorted(agents)), "reading the log")
        ]

    def log_bounds(self, *, agents: frozenset[str] | None = None, session: tuple[str, str] | None = None) -> LogBounds:
        """Earliest stored, last and pruned-through sequences of the log (all, ``agents``', or one session):
        what a resuming log-stream reader needs to tell a gap from a quiet log."""
        return self._host_read(
            lambda: self.store.log_bounds(None if agents is None else sorted(agents), session), "reading the log bounds"
        )
