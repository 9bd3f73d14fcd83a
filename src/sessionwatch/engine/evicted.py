"""Stale notices the queue cap evicted come back when the watcher next empties its queue.

A full queue evicts its oldest entry on every append, a pending stale notice included; the pair keeps
lagging (its cursor says so) with nothing queued, and before this only the restart sweep queued the
notice again. Now a drain, or an acknowledgment by id, that took a whole *full* queue (the state every
eviction leaves behind) queues the notices of the watcher's lagging pairs that have none, oldest change first,
as many as the queue has room for; the rest follow as room appears. The notice is the one that was
evicted (it quotes the cursor's last_seen), so acknowledging it works as it would have. Only a full
queue pays for the cursor read: every other drain costs what it did.

Until then a delivery of a full queue says how many more sessions changed (``withheld_count``, the
line ``notices.withheld_line``), so an agent is never left believing it saw every change.
"""

from __future__ import annotations

from collections.abc import Sized

from ..notices import target_from_context_key
from ..store import Store
from ..store.base import Render
from ..store.records import Cursor, QueueEntry


def requeue_evicted(store: Store, watcher: str, taken: int, render: Render, now: int, cap: int) -> int:
    """``taken`` entries just left ``watcher``'s queue: when it was full, queue again what the cap evicted.
    Returns how many notices were queued."""
    if taken < cap:  # not a whole full queue: nothing was evicted, or the rest is still to be taken
        return 0
    queued = store.peek(watcher, render, cap)
    room = cap - len(queued)
    missing = withheld(store, watcher, queued)
    for c in missing[:room]:
        template = render(c.target)
        store.enqueue(
            watcher,
            f"{template.prefix}{c.last_seen}{template.suffix}",
            template.context_key,
            now,
            cap,
            queue_only=c.provenance == "ambient-group",
            notice=(c.target, c.last_seen),
        )
    return min(room, len(missing))


def withheld(store: Store, watcher: str, queued: list[QueueEntry]) -> list[Cursor]:
    """The watcher's lagging pairs with no notice among ``queued``, oldest change first."""
    have = {e.target or target_from_context_key(e.context_key) for e in queued}
    lagging = [c for c in store.cursors(watcher, None) if c.material > c.last_seen and c.target not in have]
    return sorted(lagging, key=lambda c: (c.updated_at, c.target))


def withheld_count(store: Store, watcher: str, shown: Sized | None, render: Render, cap: int) -> int:
    """How many of ``watcher``'s lagging pairs have no notice in its queue, when that queue is full (the
    only state in which the cap can have evicted one); 0 otherwise. ``shown``: what the caller just
    peeked or leased, when it has it: shorter than the cap, nothing is read."""
    if shown is not None and len(shown) < cap:
        return 0
    queued = store.peek(watcher, render, cap)
    if len(queued) < cap:
        return 0
    return len(withheld(store, watcher, queued))
