"""Bookkeeping that keeps the SQLite prune proportional to what it deletes (run inside the caller's
transaction).

- The row cap needs the number of events. Counting them walks the whole log, so the count is kept in
  ``meta``: ``event_rows`` rows with a sequence up to ``event_rows_upto``. Rows recorded since are
  counted when the prune needs the total (a walk over the newest rows only), and every delete of
  events subtracts what it removed (``forget_rows``). Recording itself never writes the count.
- The stale-cursor cleanup examines a bounded slice of the cursor table per prune, resuming at the
  key where the previous slice stopped (``cursor_prune_at``) and wrapping around at the end.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (key, value))


# twin: store/postgres_functions.sql::sw_event_rows (bound by tests/conformance/test_stateful.py and
#   tests/conformance/test_flat_costs.py::test_the_cap_keeps_exactly_the_newest_rows_across_batches_and_deletes)
def event_rows(conn: sqlite3.Connection) -> int:
    """The exact number of events, from the kept count plus the rows recorded since it was taken."""
    hi = conn.execute("SELECT max(sequence) FROM events").fetchone()[0] or 0
    kept, upto = _meta(conn, "event_rows"), _meta(conn, "event_rows_upto")
    if kept is None or upto is None:  # first prune on this store: count once
        total = conn.execute("SELECT count(*) FROM events WHERE sequence <= ?", (hi,)).fetchone()[0]
    elif hi > int(upto):
        total = int(kept) + conn.execute("SELECT count(*) FROM events WHERE sequence > ? AND sequence <= ?",
                                         (int(upto), hi)).fetchone()[0]
    else:
        total = int(kept)
    if kept is None or upto is None or hi > int(upto) or total != int(kept):
        _set_meta(conn, "event_rows", str(total))
        _set_meta(conn, "event_rows_upto", str(max(hi, int(upto or 0))))
    return total


# twin: store/postgres_functions.sql::sw_forget_rows (bound by tests/conformance/test_stateful.py and
#   tests/conformance/test_flat_costs.py::test_the_cap_keeps_exactly_the_newest_rows_across_batches_and_deletes)
def forget_rows(conn: sqlite3.Connection, sequences: Sequence[int]) -> None:
    """Deleted events leave the kept count (only those it had counted)."""
    upto = _meta(conn, "event_rows_upto")
    if upto is None or not sequences:
        return
    gone = sum(1 for s in sequences if s <= int(upto))
    if gone:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) - ? WHERE key = 'event_rows'", (gone,))


# twin: store/postgres_functions.sql::sw_prune_step (p_slice > 0) (bound by tests/conformance/test_stateful.py and
#   tests/conformance/test_flat_costs.py::test_stale_cursors_go_a_slice_per_prune)
def expire_cursors(conn: sqlite3.Connection, cutoff: int, budget: int) -> list[str]:
    """Delete cursors untouched since ``cutoff`` among the next ``budget`` rows; returns their watchers."""
    at = _meta(conn, "cursor_prune_at")
    start = tuple(json.loads(at)) if at else None
    gone: list[str] = []
    if start is not None:
        rows = conn.execute("SELECT target, watcher, updated_at FROM cursors WHERE (target, watcher) > (?, ?)"
                            " ORDER BY target, watcher LIMIT ?", (*start, budget)).fetchall()
    else:
        rows = conn.execute("SELECT target, watcher, updated_at FROM cursors ORDER BY target, watcher LIMIT ?",
                            (budget,)).fetchall()
    if len(rows) < budget and start is not None:  # wrapped: the rest of the budget from the start
        rows += conn.execute("SELECT target, watcher, updated_at FROM cursors WHERE (target, watcher) <= (?, ?)"
                             " ORDER BY target, watcher LIMIT ?", (*start, budget - len(rows))).fetchall()
    stale = [(t, w) for t, w, u in rows if u < cutoff]
    for t, w in stale:
        conn.execute("DELETE FROM cursors WHERE target = ? AND watcher = ?", (t, w))
        gone.append(w)
    if len(rows) < budget:
        conn.execute("DELETE FROM meta WHERE key = 'cursor_prune_at'")  # the whole table was examined
    else:
        _set_meta(conn, "cursor_prune_at", json.dumps([rows[-1][0], rows[-1][1]]))
    return gone
