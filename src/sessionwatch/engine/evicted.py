"""Stale notices the queue cap evicted come back when the watcher next empties its queue.

A full queue evicts its oldest entry on every append, a pending stale notice included; the pair keeps
lagging (its cursor says so) with nothing queued, and before this only the restart sweep queued the
notice again. Now a drain, or an acknowledgment by id, that took a whole *full* queue (the state every
eviction leaves behind) queues the notices of the watcher's lagging pairs that have none, oldest change first,
as many as the queue has room for; the rest follow as room appears. The notice is the one that was
evicted (it quotes the cursor's last_seen), so acknowledging it works as it would have. Only a full
queue pays for the cursor read: every other drain costs what it did.
"""

from __future__ import annotations

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
