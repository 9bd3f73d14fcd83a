"""The durable system-event queue on SQLite (see the schema comment on ``queue_heads``).

A session's queue is its N newest appends: entries carry an append index, and an entry with index
``i`` is live while ``i > drained`` and ``appended - i < N``. Appending never writes an eviction;
removing a live entry from the middle renumbers the remaining live entries to the top of the range
(``_compact``), which keeps "oldest evicted first" exact for later appends. Stale-state notices sit
in their cursor row (``queued_*``); other entries sit in ``system_events``.

The live notice slots form a chain through the cursor rows (migration 0007), so reading the queue costs
at most N primary-key lookups into ``cursors`` whatever the number of targets watched:
``queue_heads.last_slot`` is the target of the newest notice append and each slot's ``queued_prev`` the
target of the watcher's notice appended just before it, each as its slot key (``slot_keys``: a small
integer, so the fan-out's head and slot rows stay as short as before; ``slot_key``). A notice append
sets both in the row writes it makes anyway (the head's index bump, the slot's fill). Reads walk from
``last_slot`` and stop at the first node that is missing, not live, or not older than the one before
(``queued_id`` not decreasing: a node re-appended since jumped to the front). Without removals from the
middle, liveness is a threshold on the append index, so dead nodes are the chain's oldest suffix and the
walk is complete. Removals from the middle mark the slot ``queued_idx = 0`` and call ``_compact``, whose
walk steps over such nodes and which relinks exactly the live slots. A deleted cursor row breaks the
chain: ``_compact`` then finds the live slots from the watcher's cursors instead (bulk deletions only:
delete-session, reset, stale-cursor expiry, and an unwatch whose row was linked behind a live slot).

All functions run inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ..base import Render
from ..records import QueueEntry

LIVE = "idx > h.drained AND h.appended - idx < ?"

LIVE_C = "c.queued_idx > h.drained AND h.appended - c.queued_idx < ?2"
# The chain walk from the head, two key lookups per step (the slot key's target, then the cursor); ?1
# watcher, ?2 cap, ?3 the step bound. {go}: may the walk go on past this node. A row with go false ends
# it (kept, so the caller sees where it stopped).
_WALK = (
    "WITH RECURSIVE chain(target, key, idx, id, prev, ls, ts, quiet, live, go, n) AS ("
    " SELECT c.target, k.id, c.queued_idx, c.queued_id, c.queued_prev, c.queued_ls, c.queued_ts, c.queued_quiet,"
    " " + LIVE_C + ", {go}, 1 FROM queue_heads h JOIN slot_keys k ON k.id = h.last_slot"
    " JOIN cursors c ON c.target = k.target AND c.watcher = h.session_key WHERE h.session_key = ?1"
    " UNION ALL"
    " SELECT c.target, k.id, c.queued_idx, c.queued_id, c.queued_prev, c.queued_ls, c.queued_ts, c.queued_quiet,"
    " " + LIVE_C + ", {go}, w.n + 1 FROM chain w JOIN slot_keys k ON k.id = w.prev"
    " JOIN cursors c ON c.target = k.target AND c.watcher = ?1"
    " JOIN queue_heads h ON h.session_key = ?1 WHERE w.go AND w.n < ?3 AND c.queued_id < w.id)"
)
_LIVE_SLOTS = _WALK.format(go="(" + LIVE_C + ")") + " SELECT idx, target, ls, ts, quiet, id FROM chain WHERE live"
# Compaction's walk also steps over slots just taken out (queued_idx = 0, their queued_id kept).
_COMPACT_WALK = (
    _WALK.format(go="(" + LIVE_C + " OR c.queued_idx = 0)")
    + " SELECT target, key, idx, prev, live, go, n FROM chain ORDER BY n"
)
# The live slots from the watcher's cursors: after a cursor row in the chain was deleted.
_SCAN_SLOTS = (
    "SELECT c.queued_idx, c.target, k.id, c.queued_prev FROM cursors c JOIN queue_heads h"
    " ON h.session_key = c.watcher JOIN slot_keys k ON k.target = c.target WHERE c.watcher = ?1 AND " + LIVE_C
)
# A notice append: the slot first (its index is the head's next one, its predecessor the head's newest),
# then the head (?1 watcher, ?2 target, ?3 last_seen, ?4 ts, ?5 quiet; ?2 of the bump: the slot key).
_FILL_ONE = (
    "UPDATE cursors SET queued_idx = h.appended + 1, queued_id = h.appended + 1, queued_prev = h.last_slot,"
    " queued_ls = ?3, queued_ts = ?4, queued_quiet = ?5 FROM queue_heads h"
    " WHERE h.session_key = ?1 AND cursors.target = ?2 AND cursors.watcher = ?1"
)
_BUMP_ONE = "UPDATE queue_heads SET appended = appended + 1, last_slot = ?2 WHERE session_key = ?1"
_LIVE_GENERIC = (
    "SELECT e.idx, e.context_key, e.text, e.ts, e.eid FROM system_events e JOIN queue_heads h"
    " ON h.session_key = e.session_key WHERE e.session_key = ?1 AND e.idx > h.drained AND h.appended - e.idx < ?2"
)


# Every watcher's chain from its cursors: queued slots linked in append order (dead ones end a walk), each
# head pointing at its newest. The backfill of migration 0007, and a change of the stored queue cap (a
# larger cap makes older appends live again, which a chain cut at an earlier compaction may not reach).
RELINK_ALL = (
    "INSERT INTO slot_keys (target) SELECT DISTINCT target FROM cursors WHERE queued_idx > 0 ON CONFLICT DO NOTHING",
    "UPDATE cursors SET queued_prev = l.prev FROM (SELECT c.target, c.watcher, lag(k.id) OVER"
    " (PARTITION BY c.watcher ORDER BY c.queued_idx) AS prev FROM cursors c JOIN slot_keys k ON k.target = c.target"
    " WHERE c.queued_idx > 0) l WHERE cursors.target = l.target AND cursors.watcher = l.watcher",
    "UPDATE queue_heads SET last_slot = (SELECT k.id FROM cursors c JOIN slot_keys k ON k.target = c.target"
    " WHERE c.watcher = queue_heads.session_key AND c.queued_idx > 0 ORDER BY c.queued_idx DESC LIMIT 1)",
)


def slot_key(conn: sqlite3.Connection, target: str) -> int:
    """The target's slot key (the small integer the chain stores instead of the key text)."""
    row = conn.execute("SELECT id FROM slot_keys WHERE target = ?", (target,)).fetchone()
    if row is None:
        row = conn.execute("INSERT INTO slot_keys (target) VALUES (?) RETURNING id", (target,)).fetchone()
    return int(row[0])


def slot_keys_of(conn: sqlite3.Connection, targets: Sequence[str]) -> dict[str, int]:
    """The slot keys of many targets in two set-based statements (those missing are created), for a caller
    that appends many notices at once (the sweep) instead of one lookup per append."""
    listed = json.dumps(list(targets))
    # "WHERE true": an INSERT ... SELECT with an upsert clause needs a WHERE to parse unambiguously.
    conn.execute(
        "INSERT INTO slot_keys (target) SELECT value FROM json_each(?) WHERE true ON CONFLICT DO NOTHING", (listed,)
    )
    rows = conn.execute("SELECT target, id FROM slot_keys WHERE target IN (SELECT value FROM json_each(?))", (listed,))
    return {str(t): int(i) for t, i in rows}


# twin: store/postgres_functions.sql::sw_ensure_head (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_entries_are_per_session)
def ensure_head(conn: sqlite3.Connection, session_key: str) -> None:
    conn.execute("INSERT INTO queue_heads (session_key) VALUES (?) ON CONFLICT DO NOTHING", (session_key,))


def head(conn: sqlite3.Connection, session_key: str) -> tuple[int, int]:
    row = conn.execute("SELECT appended, drained FROM queue_heads WHERE session_key = ?", (session_key,)).fetchone()
    if row is None:
        ensure_head(conn, session_key)
        return 0, 0
    return row[0], row[1]


def _next_index(conn: sqlite3.Connection, session_key: str) -> int:
    ensure_head(conn, session_key)
    return int(
        conn.execute(
            "UPDATE queue_heads SET appended = appended + 1 WHERE session_key = ? RETURNING appended", (session_key,)
        ).fetchone()[0]
    )


# twin: store/postgres_functions.sql::sw_queue (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/delivery.py::test_ids_stay_put_when_the_queue_is_renumbered)
def entries(conn: sqlite3.Connection, session_key: str, render: Render, cap: int) -> list[QueueEntry]:
    """The live queue, oldest first. An entry's ``id`` is its stable id, not its (movable) index."""
    out: list[tuple[int, QueueEntry]] = []
    for idx, target, last_seen, ts, quiet, eid in conn.execute(_LIVE_SLOTS, (session_key, cap, cap + 1)):
        t = render(target)
        out.append(
            (idx, QueueEntry(eid, session_key, t.text(last_seen), t.context_key, ts, bool(quiet), target=target))
        )
    for idx, ctx, text, ts, eid in conn.execute(_LIVE_GENERIC, (session_key, cap)):
        out.append((idx, QueueEntry(eid, session_key, text, ctx, ts)))
    out.sort(key=lambda item: item[0])
    return [e for _, e in out]


# twin: store/postgres/queue.py::PostgresQueue.has_pending_notice (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/wakes.py::test_a_promoted_ambient_notice_counts_as_pending_for_the_trailing_wake)
def has_pending_notice(conn: sqlite3.Connection, watcher: str, cap: int) -> bool:
    if conn.execute(_LIVE_SLOTS + " AND quiet = 0 LIMIT 1", (watcher, cap, cap + 1)).fetchone():
        return True
    return (
        conn.execute(_LIVE_GENERIC + " AND e.context_key LIKE 'session-state:%' LIMIT 1", (watcher, cap)).fetchone()
        is not None
    )


# twin: store/postgres_functions.sql::sw_drain's 'withheld' row (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_a_notice_the_cap_evicted_is_back_after_a_drain_of_a_queue_no_longer_full)
def has_withheld(conn: sqlite3.Connection, watcher: str, cap: int) -> bool:
    """Does a lagging pair of ``watcher`` have no live notice slot (the cap evicted its notice)? Reads only
    the watcher's lagging cursors (index cursors_lagging_by_watcher), and stops at the first."""
    row = conn.execute(
        "SELECT 1 FROM cursors c LEFT JOIN queue_heads h ON h.session_key = c.watcher"
        " WHERE c.watcher = ?1 AND c.material > c.last_seen AND NOT coalesce(" + LIVE_C + ", 0) LIMIT 1",
        (watcher, cap),
    ).fetchone()
    return row is not None


# twin: store/postgres_functions.sql::sw_walk (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_queue_of_a_wide_watcher_matches_an_eager_list_under_reappends_drains_and_unwatches)  # noqa: E501
def _walked_slots(conn: sqlite3.Connection, session_key: str, cap: int) -> list[tuple[int, str, int, Any]] | None:
    """The live slots (idx, target, slot key, prev) by the chain walk; None when the walk cannot vouch
    for them."""
    bound = 2 * cap + 1  # live slots, plus those just taken out, plus the node that ends the walk
    rows = conn.execute(_COMPACT_WALK, (session_key, cap, bound)).fetchall()
    if not rows:
        last = conn.execute("SELECT last_slot FROM queue_heads WHERE session_key = ?", (session_key,)).fetchone()
        return None if last is not None and last[0] is not None else []  # newest node deleted
    _, _, _, prev, _, go, n = rows[-1]
    if go and prev is not None:
        if n >= bound:
            return None
        if (
            conn.execute(
                "SELECT 1 FROM slot_keys k JOIN cursors c ON c.target = k.target AND c.watcher = ?2 WHERE k.id = ?1",
                (prev, session_key),
            ).fetchone()
            is None
        ):
            return None  # the walk hit a deleted cursor row
    return [(idx, t, key, p) for t, key, idx, p, live, _, _ in rows if live]


# twin: store/postgres_functions.sql::sw_compact (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_a_replaced_notice_does_not_evict_an_older_entry)
def _compact(conn: sqlite3.Connection, session_key: str, cap: int) -> None:
    """Renumber the live entries to the top of the index range after a removal from the middle, and
    relink the chain over exactly the live slots."""
    appended, drained = head(conn, session_key)
    slots = _walked_slots(conn, session_key, cap)
    if slots is None:  # rare (bulk cursor deletions): the watcher's cursors
        slots = conn.execute(_SCAN_SLOTS, (session_key, cap)).fetchall()
    live: list[tuple[int, str, Any, Any]] = [(idx, "slot", (target, key), prev) for idx, target, key, prev in slots]
    live += [(idx, "generic", (idx, None), None) for idx, *_ in conn.execute(_LIVE_GENERIC, (session_key, cap))]
    live.sort(key=lambda item: item[0])
    base = appended - len(live)
    before: dict[int, Any] = {}  # each slot's predecessor among the live slots (None for the oldest)
    newest = None
    for k, (_, where, ref, _) in enumerate(live):
        if where == "slot":
            before[k] = newest
            newest = ref[1]
    # New indices are >= the old ones; renumbering newest first avoids primary-key collisions.
    for k in range(len(live) - 1, -1, -1):
        old, where, ref, prev = live[k]
        new = base + k + 1
        if where == "slot":
            if new != old or prev != before[k]:
                conn.execute(
                    "UPDATE cursors SET queued_idx = ?, queued_prev = ? WHERE target = ? AND watcher = ?",
                    (new, before[k], ref[0], session_key),
                )
        elif new != old:
            conn.execute("UPDATE system_events SET idx = ? WHERE session_key = ? AND idx = ?", (new, session_key, old))
    conn.execute(
        "DELETE FROM system_events WHERE session_key = ?1 AND (idx <= ?2 OR ?3 - idx >= ?4)",
        (session_key, drained, appended, cap),
    )
    conn.execute(
        "UPDATE queue_heads SET last_slot = ?2 WHERE session_key = ?1 AND last_slot IS NOT ?2", (session_key, newest)
    )


def slot_live(conn: sqlite3.Connection, watcher: str, target: str, cap: int) -> tuple[bool, int] | None:
    """(live, quoted last_seen) of the pair's notice slot; None when there is no cursor."""
    row = conn.execute(
        "SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < ?3, c.queued_ls FROM cursors c"
        " JOIN queue_heads h ON h.session_key = c.watcher WHERE c.target = ?2 AND c.watcher = ?1",
        (watcher, target, cap),
    ).fetchone()
    return None if row is None else (bool(row[0]), row[1])


# twin: store/postgres_functions.sql::sw_remove_slot (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/delivery.py::test_a_read_covering_a_queued_notice_withdraws_it)
def remove_slot(conn: sqlite3.Connection, watcher: str, target: str, cap: int) -> bool:
    """Take the pair's notice out of the queue (the cursor stays)."""
    state = slot_live(conn, watcher, target, cap)
    conn.execute("UPDATE cursors SET queued_idx = 0 WHERE target = ? AND watcher = ?", (target, watcher))
    if state is not None and state[0]:
        _compact(conn, watcher, cap)
        return True
    return False


def after_removal(conn: sqlite3.Connection, watchers: set[str], cap: int) -> None:
    """Renumber the queues whose live entries were removed (cursor rows deleted, entries deleted)."""
    for w in watchers:
        _compact(conn, w, cap)


# twin: store/postgres_functions.sql::sw_append_notice (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/watchers.py::test_material_updates_while_pending_keep_one_byte_identical_notice)
def append_notice(
    conn: sqlite3.Connection,
    watcher: str,
    target: str,
    last_seen: int,
    context_key: str,
    ts: int,
    cap: int,
    quiet: bool,
    slot: int | None = None,
) -> bool:
    """Queue the pair's notice quoting ``last_seen``: dedupe (explicit) or replace (queue-only).

    The cursor row must exist. ``slot``: the target's slot key when the caller already has it
    (``slot_keys_of``). Returns True when an entry was appended.
    """
    state = slot_live(conn, watcher, target, cap)
    assert state is not None, "append_notice needs the cursor row"
    live, quoted = state
    if not quiet:
        if live and quoted == last_seen:
            return False
    else:
        same_ctx_generic = conn.execute(
            _LIVE_GENERIC + " AND e.context_key = ?3", (watcher, cap, context_key)
        ).fetchall()
        if live and quoted == last_seen and not same_ctx_generic:
            return False  # exactly one entry with this context key, and its text is identical
        removed = live or bool(same_ctx_generic)
        if same_ctx_generic:
            conn.execute("DELETE FROM system_events WHERE session_key = ? AND context_key = ?", (watcher, context_key))
        if live:
            conn.execute("UPDATE cursors SET queued_idx = 0 WHERE target = ? AND watcher = ?", (target, watcher))
        if removed:
            _compact(conn, watcher, cap)
    if not quiet and live:
        # One slot per pair: a reopen while the older notice is still queued replaces it.
        conn.execute("UPDATE cursors SET queued_idx = 0 WHERE target = ? AND watcher = ?", (target, watcher))
        _compact(conn, watcher, cap)
    ensure_head(conn, watcher)
    conn.execute(_FILL_ONE, (watcher, target, last_seen, ts, int(quiet)))
    conn.execute(_BUMP_ONE, (watcher, slot_key(conn, target) if slot is None else slot))
    return True


# twin: store/postgres_functions.sql::sw_append_generic (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_dedupe_is_by_context_key_and_exact_text)
def append_generic(
    conn: sqlite3.Connection, session_key: str, text: str, context_key: str | None, ts: int, cap: int
) -> QueueEntry | None:
    """Queue any other entry, deduped by context key + exact text."""
    ensure_head(conn, session_key)
    if conn.execute(
        _LIVE_GENERIC + " AND e.context_key IS ?3 AND e.text = ?4", (session_key, cap, context_key, text)
    ).fetchone():
        return None
    idx = _next_index(conn, session_key)
    conn.execute(
        "INSERT INTO system_events (session_key, idx, eid, context_key, text, ts) VALUES (?1,?2,?2,?3,?4,?5)",
        (session_key, idx, context_key, text, ts),
    )
    appended, drained = idx, head(conn, session_key)[1]
    conn.execute(
        "DELETE FROM system_events WHERE session_key = ?1 AND (idx <= ?2 OR ?3 - idx >= ?4)",
        (session_key, drained, appended, cap),
    )
    return QueueEntry(idx, session_key, text, context_key, ts)


# twin: store/postgres_functions.sql::sw_take_queue (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/queue.py::test_drain_returns_system_lines_and_empties_the_queue)
def drain(conn: sqlite3.Connection, session_key: str, render: Render, cap: int) -> list[QueueEntry]:
    """Remove every entry (live ones are returned)."""
    out = entries(conn, session_key, render, cap)
    # Every slot dies with drained = appended: the chain needs no write.
    conn.execute("UPDATE queue_heads SET drained = appended WHERE session_key = ?", (session_key,))
    conn.execute("DELETE FROM system_events WHERE session_key = ?", (session_key,))
    return out


# twin: store/postgres_functions.sql::sw_take_entries (bound by sessionwatch/testing/stateful.py and
#   sessionwatch/testing/delivery.py::test_ack_removes_exactly_the_given_entries)
def remove_ids(conn: sqlite3.Connection, session_key: str, ids: set[int], render: Render, cap: int) -> list[QueueEntry]:
    """Take the live entries with these stable ids out of the queue (others stay); returns them."""
    taken = [e for e in entries(conn, session_key, render, cap) if e.id in ids]
    if not taken:
        return []
    for e in taken:
        if e.target is not None:
            conn.execute("UPDATE cursors SET queued_idx = 0 WHERE target = ? AND watcher = ?", (e.target, session_key))
        else:
            conn.execute("DELETE FROM system_events WHERE session_key = ? AND eid = ?", (session_key, e.id))
    _compact(conn, session_key, cap)
    return taken
