"""A delivery under a lease: the entries one answer carries, held for it until it is settled.

A face whose answer may never reach its client (an HTTP drain) takes the queue's free entries under a
lease (``Gateway.deliver_system_events``), writes them, and then either settles (the answer is
complete: the entries are acknowledged, as by ``ack_system_events``) or releases (the client went away:
they are free again at once). A holder that dies settles nothing; its lease runs out and the entries
are back in the queue for the next drain. While the lease lives no other drain, on any process sharing
the store, hands them out, so two concurrent drains never answer with the same entry.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..clock import Clock
from ..errors import StoreInDoubt
from ..notices import NoticeTemplate, target_from_context_key
from ..settings import Settings
from ..store.base import Store
from ..store.records import QueueEntry, Taken
from ..types import QueueEntry as QueueEntryJSON
from .wakes import WakeHub

log = logging.getLogger("sessionwatch.engine")

PROOF_MARGIN_MS = 1_000  # a proof read must end this long before the lease does (clocks step, reads take time)
PROOF_PAUSE_S = 0.2  # between proof reads while the store is unreachable


class Queues(Protocol):
    """What a leased delivery needs of the engine: its store and clock, and what a settled delivery does
    after (``SystemEvents`` gives all of it)."""

    store: Store
    clock: Clock
    settings: Settings
    wakes: WakeHub
    _render: Callable[[str], NoticeTemplate]

    def _taken(self, watcher: str, taken: Taken) -> None: ...


def new_holder() -> str:
    """A holder name no other delivery uses."""
    return uuid.uuid4().hex


@dataclass
class Delivery:
    """The entries of one leased delivery (``entries``, oldest first) and what ends it."""

    gateway: Queues
    session_key: str
    holder: str
    lease_ms: int
    entries: list[QueueEntryJSON]
    until: int
    _ended: bool = field(default=False, repr=False)

    @property
    def ids(self) -> list[int]:
        return [e["id"] for e in self.entries]

    def renew(self) -> bool:
        """Hold the entries for another full lease, just before the answer completes: False when the
        lease was lost (it ran out and another delivery took an entry, or another face acknowledged
        one), and the answer must then not complete, or the entry would be answered twice."""
        if not self.entries:
            return True
        gw = self.gateway
        now = gw.clock()
        until = now + self.lease_ms
        if not gw.store.renew_lease(self.session_key, self.holder, self.ids, now, until):
            return False
        self.until = until
        return True

    def settle(self) -> bool:
        """The answer is complete: acknowledge its entries (the stale-state ones as a drain does) and end
        the lease. False when the lease was lost (nothing changed; the entries come again)."""
        if self._ended or not self.entries:
            self._ended = True
            return True
        gw = self.gateway
        try:
            got = gw.store.acknowledge_leased(
                self.session_key,
                self.holder,
                self.ids,
                target_from_context_key,
                gw._render,
                gw.clock(),
                gw.settings.queue_cap,
            )
        except StoreInDoubt:
            # The connection broke around the commit (a database crash): the acknowledgment may be durable
            # with no answer to say so. Answering "failed" then would lose the entries, so look.
            if not self._gone_from_queue():
                raise
            log.warning(
                "acknowledging a delivery from the queue of %s was in doubt; its %d entries are gone from the "
                "queue within the lease, so it took effect",
                self.session_key,
                len(self.entries),
            )
            # Reopened notices wake through the store's poll instead; whether any is withheld is asked.
            got = Taken(self._records(), [], withheld=True)
        if got is None:
            return False  # what it still holds stays held until release() or the lease's end
        self._ended = True
        gw._taken(self.session_key, got)
        return True

    def _gone_from_queue(self) -> bool:
        """After an acknowledgment in doubt: True when none of this delivery's entries is queued any more,
        read (durably) while its lease still held them, so no other drain can have taken them and only
        this acknowledgment removed them. False when one is still queued (it did not commit: the entries
        come again), or when the store cannot be read before the lease ends (the answer is then cut
        short: an answer is never complete while its entries may come again)."""
        gw = self.gateway
        ids = set(self.ids)
        while gw.clock() < self.until - PROOF_MARGIN_MS:
            try:
                queued = gw.store.peek(self.session_key, gw._render, gw.settings.queue_cap)
            except Exception as exc:  # noqa: BLE001 - the server is still coming back: look again
                log.info("looking for the entries of an acknowledgment in doubt failed (again soon): %s", exc)
                time.sleep(PROOF_PAUSE_S)
                continue
            read_within_lease = gw.clock() < self.until - PROOF_MARGIN_MS
            return read_within_lease and not any(e.id in ids for e in queued)
        return False

    def _records(self) -> list[QueueEntry]:
        """This delivery's entries as the store's records (what a settle would have returned)."""
        return [
            QueueEntry(
                e["id"],
                self.session_key,
                e["text"],
                e["contextKey"],
                e["ts"],
                target=target_from_context_key(e["contextKey"]),
            )
            for e in self.entries
        ]

    def release(self) -> None:
        """The answer will not complete: free the entries for the next drain now, not at the lease's end."""
        if self._ended:
            return
        self._ended = True
        if self.entries:
            self.gateway.store.release_lease(self.session_key, self.holder)


def lease(gw: Queues, session_key: str, lease_ms: int, render_entry: Callable[..., QueueEntryJSON]) -> Delivery:
    """Take ``session_key``'s free entries under a new lease of ``lease_ms``."""
    holder = new_holder()
    now = gw.clock()
    until = now + lease_ms
    taken = gw.store.lease(session_key, holder, gw._render, now, until, gw.settings.queue_cap)
    return Delivery(gw, session_key, holder, lease_ms, [render_entry(e) for e in taken], until)
