"""The durable system-event queue on SQLite (see the schema comment on ``queue_heads``).

A session's queue is its N newest appends: entries carry an append index, and an entry with index
``i`` is live while ``i > drained`` and ``appended - i < N``. Appending never writes an eviction;
removing a live entry from the middle renumbers the remaining live entries to the top of the range
(``_compact``), which keeps "oldest evicted first" exact for later appends. Stale-state notices sit
in their cursor row (``queued_*``); other entries sit in ``system_events``.

The watcher's ``queue_heads.slots`` (migration 0007) lists the targets whose slots may be live, so
reading the queue costs at most N primary-key lookups into ``cursors`` whatever the number of targets
watched. It covers every live slot: a notice append pushes its target (keeping the last N pushes) in the
same row update that takes the index, and a compaction, which renumbers entries, rewrites it to exactly
the live slots. Each element stands for a distinct append index, in index order, so a live slot (fewer
than N appends after it) is always among the last N. Elements may be stale (re-queued or removed
slots); reads filter by liveness.

All functions run inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .base import Render
from .records import QueueEntry

LIVE = "idx > h.drained AND h.appended - idx < ?"

# The list is split in SQL (a recursive CTE); the IN list drives key lookups and drops repeated targets.
_LIVE_SLOTS = (
    "SELECT c.queued_idx, c.target, c.queued_ls, c.queued_ts, c.queued_quiet, c.queued_id FROM cursors c"
    " JOIN queue_heads h ON h.session_key = c.watcher WHERE c.watcher = ?1"
    " AND c.target IN (WITH RECURSIVE s(t, rest) AS (SELECT NULL, slots FROM queue_heads WHERE session_key = ?1"
    " UNION ALL SELECT substr(rest, 1, instr(rest, ' ') - 1), substr(rest, instr(rest, ' ') + 1) FROM s"
    " WHERE rest <> '') SELECT t FROM s WHERE t IS NOT NULL)"
    " AND c.queued_idx > h.drained AND h.appended - c.queued_idx < ?2")
# Push a target onto a head's slot list, keeping the last N ({cap}) pushes; used inside the UPDATE that
# takes the append index, so the list costs no extra write. The list is plain text, each target followed
# by a space (keys never hold whitespace), with its length in slot_count: a push is a substr and a
# concatenation (a JSON list parsed three times per push cost 2x on the widest fan-out).
PUSH_SLOT = ("slots = CASE WHEN slot_count >= {cap} THEN substr(slots, instr(slots, ' ') + 1) ELSE slots END"
             " || {target} || ' ', slot_count = CASE WHEN slot_count >= {cap} THEN slot_count ELSE slot_count + 1 END")
_LIVE_GENERIC = (
    "SELECT e.idx, e.context_key, e.text, e.ts, e.eid FROM system_events e JOIN queue_heads h"
    " ON h.session_key = e.session_key WHERE e.session_key = ?1 AND e.idx > h.drained AND h.appended - e.idx < ?2")


# Every head's slot list from its cursors, for the cap ?1: the backfill of migration 0007, and a change of
# the stored queue cap (a larger cap makes older appends live again, which the last-N pushes may miss).
REBUILD_SLOTS = (
    "UPDATE queue_heads SET (slots, slot_count) = (SELECT coalesce(max(l.listed), ''), count(*) FROM ("
    # group_concat as a window function concatenates in the window's order (oldest append first)
    " SELECT group_concat(c.target || ' ', '') OVER (ORDER BY c.queued_idx ROWS BETWEEN UNBOUNDED PRECEDING"
    " AND UNBOUNDED FOLLOWING) AS listed FROM cursors c WHERE c.watcher = queue_heads.session_key"
    " AND c.queued_idx > queue_heads.drained AND queue_heads.appended - c.queued_idx < ?1) l)")


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
    return conn.execute("UPDATE queue_heads SET appended = appended + 1 WHERE session_key = ? RETURNING appended",
                        (session_key,)).fetchone()[0]


def _next_slot_index(conn: sqlite3.Connection, watcher: str, target: str, cap: int) -> int:
    """Take the next append index for the pair's notice and list its target among the slots."""
    ensure_head(conn, watcher)
    return conn.execute("UPDATE queue_heads SET appended = appended + 1, "
                        + PUSH_SLOT.format(cap="?3", target="?2") + " WHERE session_key = ?1 RETURNING appended",
                        (watcher, target, cap)).fetchone()[0]


def entries(conn: sqlite3.Connection, session_key: str, render: Render, cap: int) -> list[QueueEntry]:
    """The live queue, oldest first. An entry's ``id`` is its stable id, not its (movable) index."""
    out: list[tuple[int, QueueEntry]] = []
    for idx, target, last_seen, ts, quiet, eid in conn.execute(_LIVE_SLOTS, (session_key, cap)):
        t = render(target)
        out.append((idx, QueueEntry(eid, session_key, t.text(last_seen), t.context_key, ts, bool(quiet),
                                    target=target)))
    for idx, ctx, text, ts, eid in conn.execute(_LIVE_GENERIC, (session_key, cap)):
        out.append((idx, QueueEntry(eid, session_key, text, ctx, ts)))
    out.sort(key=lambda item: item[0])
    return [e for _, e in out]


def has_pending_notice(conn: sqlite3.Connection, watcher: str, cap: int) -> bool:
    if conn.execute(_LIVE_SLOTS + " AND c.queued_quiet = 0 LIMIT 1", (watcher, cap)).fetchone():
        return True
    return conn.execute(_LIVE_GENERIC + " AND e.context_key LIKE 'session-state:%' LIMIT 1",
                        (watcher, cap)).fetchone() is not None


def _compact(conn: sqlite3.Connection, session_key: str, cap: int) -> None:
    """Renumber the live entries to the top of the index range after a removal from the middle."""
    appended, drained = head(conn, session_key)
    live: list[tuple[int, str, Any]] = [(idx, "slot", target) for idx, target, *_ in
                                        conn.execute(_LIVE_SLOTS, (session_key, cap))]
    live += [(idx, "generic", idx) for idx, *_ in conn.execute(_LIVE_GENERIC, (session_key, cap))]
    live.sort(key=lambda item: item[0])
    base = appended - len(live)
    # New indices are >= the old ones; renumbering newest first avoids primary-key collisions.
    for k in range(len(live) - 1, -1, -1):
        old, where, ref = live[k]
        new = base + k + 1
        if new == old:
            continue
        if where == "slot":
            conn.execute("UPDATE cursors SET queued_idx = ? WHERE target = ? AND watcher = ?", (new, ref, session_key))
        else:
            conn.execute("UPDATE system_events SET idx = ? WHERE session_key = ? AND idx = ?", (new, session_key, old))
    conn.execute("DELETE FROM system_events WHERE session_key = ?1 AND (idx <= ?2 OR ?3 - idx >= ?4)",
                 (session_key, drained, appended, cap))
    # Renumbering can move an old slot above newer pushes: the list becomes exactly the live slots.
    listed = [ref for _, where, ref in live if where == "slot"]
    conn.execute("UPDATE queue_heads SET slots = ?, slot_count = ? WHERE session_key = ?",
                 ("".join(t + " " for t in listed), len(listed), session_key))


def slot_live(conn: sqlite3.Connection, watcher: str, target: str, cap: int) -> tuple[bool, int] | None:
    """(live, quoted last_seen) of the pair's notice slot; None when there is no cursor."""
    row = conn.execute(
        "SELECT c.queued_idx > h.drained AND h.appended - c.queued_idx < ?3, c.queued_ls FROM cursors c"
        " JOIN queue_heads h ON h.session_key = c.watcher WHERE c.target = ?2 AND c.watcher = ?1",
        (watcher, target, cap)).fetchone()
    return None if row is None else (bool(row[0]), row[1])


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


def append_notice(conn: sqlite3.Connection, watcher: str, target: str, last_seen: int, context_key: str,
                  ts: int, cap: int, quiet: bool) -> bool:
    """Queue the pair's notice quoting ``last_seen``: dedupe (explicit) or replace (queue-only).

    The cursor row must exist. Returns True when an entry was appended.
    """
    state = slot_live(conn, watcher, target, cap)
    assert state is not None, "append_notice needs the cursor row"
    live, quoted = state
    if not quiet:
        if live and quoted == last_seen:
            return False
    else:
        same_ctx_generic = conn.execute(_LIVE_GENERIC + " AND e.context_key = ?3",
                                        (watcher, cap, context_key)).fetchall()
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
    idx = _next_slot_index(conn, watcher, target, cap)
    conn.execute("UPDATE cursors SET queued_idx = ?1, queued_id = ?1, queued_ls = ?2, queued_ts = ?3, queued_quiet = ?4"
                 " WHERE target = ?5 AND watcher = ?6", (idx, last_seen, ts, int(quiet), target, watcher))
    return True


def append_generic(conn: sqlite3.Connection, session_key: str, text: str, context_key: str | None,
                   ts: int, cap: int) -> QueueEntry | None:
    """Queue any other entry, deduped by context key + exact text."""
    ensure_head(conn, session_key)
    if conn.execute(_LIVE_GENERIC + " AND e.context_key IS ?3 AND e.text = ?4",
                    (session_key, cap, context_key, text)).fetchone():
        return None
    idx = _next_index(conn, session_key)
    conn.execute("INSERT INTO system_events (session_key, idx, eid, context_key, text, ts) VALUES (?1,?2,?2,?3,?4,?5)",
                 (session_key, idx, context_key, text, ts))
    appended, drained = idx, head(conn, session_key)[1]
    conn.execute("DELETE FROM system_events WHERE session_key = ?1 AND (idx <= ?2 OR ?3 - idx >= ?4)",
                 (session_key, drained, appended, cap))
    return QueueEntry(idx, session_key, text, context_key, ts)


def drain(conn: sqlite3.Connection, session_key: str, render: Render, cap: int) -> list[QueueEntry]:
    """Remove every entry (live ones are returned)."""
    out = entries(conn, session_key, render, cap)
    conn.execute("UPDATE queue_heads SET drained = appended, slots = '', slot_count = 0 WHERE session_key = ?",
                 (session_key,))
    conn.execute("DELETE FROM system_events WHERE session_key = ?", (session_key,))
    return out


def remove_ids(conn: sqlite3.Connection, session_key: str, ids: set[int], render: Render,
               cap: int) -> list[QueueEntry]:
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
