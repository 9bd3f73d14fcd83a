"""System events: a session's queue of notices. Enqueue, peek, drain, acknowledge by id, a leased delivery
(engine/leases.py), and the stale notices a full queue's cap evicted, queued again (engine/evicted.py)."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from .. import validation
from ..errors import StoreUnavailable
from ..notices import format_line, parse_notice, target_from_context_key
from ..store.records import QueueEntry, Taken
from ..types import QueueEntry as QueueEntryJSON
from . import evicted, leases
from .core import GatewayCore, failure_log
from .observe import NULL

MAX_CONTEXT_KEY = 2048


def entry_json(e: QueueEntry) -> QueueEntryJSON:
    return {"id": e.id, "text": e.text, "ts": e.ts, "contextKey": e.context_key, "line": format_line(e.ts, e.text)}


class SystemEvents(GatewayCore):
    """The system-event queue of a session, as its faces use it."""

    def enqueue_system_event(
        self, key: object, text: object, *, context_key: object = None, agent_id: object = None
    ) -> dict[str, Any]:
        skey, _ = self.resolve(key, agent_id)
        body = validation.text(text, "text")
        ctx = None
        if context_key is not None:
            ctx = validation.text(context_key, "contextKey", max_bytes=MAX_CONTEXT_KEY).lower()
        entry = self.store.enqueue(
            skey, body, ctx, self.clock(), self.settings.queue_cap, notice=parse_notice(body, ctx, self._render)
        )
        return {"queued": entry is not None, "entry": entry_json(entry) if entry else None}

    def peek_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntryJSON]:
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        return [
            entry_json(e)
            for e in self._host_read(
                lambda: self.store.peek(skey, self._render, self.settings.queue_cap), "reading the system-event queue"
            )
        ]

    def drain_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntryJSON]:
        """A watcher's turn consumes its queue: returns the entries and acknowledges session-state ones."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        try:
            taken = self.store.drain(skey, target_from_context_key, self._render, self.clock(), self.settings.queue_cap)
        except Exception as exc:  # the notices stay queued: an error, never an empty success
            failure_log.exception("drain for %s failed", skey)
            raise StoreUnavailable(f"draining the queue of {skey!r} failed: {exc.__class__.__name__}: {exc}") from exc
        self._taken(skey, taken)
        return [entry_json(e) for e in taken.entries]

    def ack_system_events(self, key: object, ids: object, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries a client received (ids from a peek): removes exactly those still queued and
        acknowledges the session-state ones as a drain does. Returns ``{acknowledged: n}``; ids that are
        gone already (acknowledged, replaced, evicted) are skipped, so a repeated ack changes nothing."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        wanted = validation.id_list(ids, "ids")
        if not wanted:
            return {"acknowledged": 0}
        taken = self.store.acknowledge_entries(
            skey, wanted, target_from_context_key, self._render, self.clock(), self.settings.queue_cap
        )
        self._taken(skey, taken)
        return {"acknowledged": len(taken.entries)}

    def deliver_system_events(
        self, key: object, *, agent_id: object = None, lease_ms: int | None = None
    ) -> leases.Delivery:
        """Take the queue's free entries for one answer that may not reach its client (an HTTP drain):
        they stay queued, leased to this delivery for ``lease_ms`` (``Settings.drain_lease_ms``), and no
        other drain hands them out meanwhile. End it with ``settle()`` once the answer is complete, or
        ``release()``; a delivery never ended frees them when the lease runs out (docs/http.md)."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        ms = max(1, int(lease_ms if lease_ms is not None else self.settings.drain_lease_ms))
        try:
            return leases.lease(self, skey, ms, entry_json)
        except Exception as exc:  # the notices stay queued: an error, never an empty success
            failure_log.exception("leasing the queue of %s failed", skey)
            raise StoreUnavailable(f"reading the queue of {skey!r} failed: {exc.__class__.__name__}: {exc}") from exc

    def withheld_notices(self, key: object, *, agent_id: object = None, shown: Sized | None = None) -> int:
        """How many more watched sessions changed than the full queue of ``key`` holds notices for (the cap
        evicted theirs; they are queued again as the queue is taken, engine/evicted.py). 0 unless the
        queue is full; given ``shown`` (the entries just peeked) shorter than the cap, nothing is read."""
        skey, _ = self.resolve(key, agent_id, stored=True)
        return self._host_read(
            lambda: evicted.withheld_count(self.store, skey, shown, self._render, self.settings.queue_cap),
            "reading the watched sessions",
        )

    def _taken(self, watcher: str, taken: Taken) -> None:
        """Entries left ``watcher``'s queue (a drain, an acknowledgment, a settled delivery): count them,
        wake what they reopened, and queue again the stale notices the cap evicted (engine/evicted.py)."""
        self._delivered(taken.entries, taken.wakes)
        self.wakes.request(taken.wakes)
        if not taken.withheld:
            return
        try:
            evicted.requeue_evicted(self.store, watcher, self._render, self.clock(), self.settings.queue_cap)
        except Exception:  # noqa: BLE001 - the next drain asks again, and the restart sweep queues them (logged)
            failure_log.exception("queueing the evicted notices of %s again failed", watcher)

    def _delivered(self, entries: list[QueueEntry], wakes: list[Any]) -> None:
        """Metrics: entries a client took off the queue, the stale notices among them, the reopens."""
        obs = self.observer
        if obs is NULL:
            return
        obs.notices_delivered(len(entries))
        obs.notices_acknowledged(sum(1 for e in entries if target_from_context_key(e.context_key) is not None))
        obs.notices_reopened(len(wakes))
