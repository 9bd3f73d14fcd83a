"""Stale notices the queue cap evicted come back when the watcher next takes from its queue.

A full queue evicts its oldest entry on every append, a pending stale notice included; the pair keeps
lagging (its cursor says so) with nothing queued, and in v1 only the next material change or the restart
sweep queued the notice again. Here every drain, acknowledgment by id or settled delivery that took
something asks the store, in the same call, whether a lagging pair of the watcher is left with no live
notice (``Taken.withheld``); when one is, the notices of those pairs are queued again, oldest change
first, as many as the queue has room for; the rest follow as room appears. The notice is the one that
was evicted (it quotes the cursor's last_seen), so acknowledging it works as it would have. Only a drain
that leaves a pair withheld pays for the cursor read.

Until then a delivery of a full queue says how many more sessions changed (``withheld_count``, the
line ``notices.withheld_line``), so an agent is never left believing it saw every change.
"""

from __future__ import annotations

from collections.abc import Sized

from ..notices import target_from_context_key
from ..store import Store
from ..store.base import Render
from ..store.records import Cursor, QueueEntry


def requeue_evicted(store: Store, watcher: str, render: Render, now: int, cap: int) -> int:
    """Queue again, up to the room ``watcher``'s queue has, the notices the cap evicted (its lagging pairs
    with none queued). Returns how many notices were queued."""
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
