"""SQLite: watch cursors and the notice queue (the ``CursorQueue`` role).

The transactions are here; the queue's derived model (append indexes, live slots, compaction) is in
``queue_model``, whose functions run inside these transactions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from ...keys import is_agent_qualified, is_subagent_key
from ..base import CursorQueue, Render
from ..records import Cursor, QueueEntry, Taken, WakeRequest
from ..rows import cursor_query
from . import queue_model
from .connection import SQLiteConnection

# Several targets: the update, then its rows read back by key. (With RETURNING, SQLite 3.40 stopped using
# the IN list as key lookups and visited every cursor of the watcher: 81 µs at 10k targets instead of 8.)
_ACK = (
    "UPDATE cursors SET last_seen = notified, notified = max(material, notified), updated_at = ?1"
    " WHERE watcher = ?2 AND target IN (SELECT value FROM json_each(?3))"
)
_ACKED = (
    "SELECT target, last_seen, material, provenance FROM cursors"
    " WHERE watcher = ?1 AND target IN (SELECT value FROM json_each(?2))"
)
_ACK_ONE = (
    "UPDATE cursors SET last_seen = notified, notified = max(material, notified), updated_at = ?1"
    " WHERE target = ?3 AND watcher = ?2 RETURNING target, last_seen, material, provenance"
)


def _live_leases(conn: sqlite3.Connection, session_key: str, now: int) -> set[int]:
    """The ids of the session's entries under a live lease."""
    rows = conn.execute("SELECT eid FROM queue_leases WHERE session_key = ? AND until > ?", (session_key, now))
    return {eid for (eid,) in rows}


def _holds(conn: sqlite3.Connection, session_key: str, holder: str, ids: list[int]) -> bool:
    """Does ``holder`` still hold a lease row (live or expired, but not taken over) for each of ``ids``?"""
    (n,) = conn.execute(
        "SELECT count(*) FROM queue_leases WHERE session_key = ? AND holder = ?"
        " AND eid IN (SELECT value FROM json_each(?))",
        (session_key, holder, json.dumps(ids)),
    ).fetchone()
    return bool(n == len(ids))


class SQLiteQueue(SQLiteConnection, CursorQueue):
    # twin: store/postgres_functions.sql::sw_register (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_an_explicit_watch_promotes_ambient_and_keeps_watermarks)
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        if watcher == target or not is_agent_qualified(watcher) or not is_agent_qualified(target):
            return False
        with self._tx() as conn:
            if (
                provenance != "explicit"
                and conn.execute(
                    "SELECT 1 FROM watch_mutes WHERE watcher = ? AND target = ?", (watcher, target)
                ).fetchone()
            ):
                return False
            existing = conn.execute(
                "SELECT provenance FROM cursors WHERE watcher = ? AND target = ?", (watcher, target)
            ).fetchone()
            if provenance == "explicit":
                conn.execute("DELETE FROM watch_mutes WHERE watcher = ? AND target = ?", (watcher, target))
            if existing is not None:
                if existing[0] == "ambient-group" and provenance == "explicit":
                    # its queued notice stops being queue-only too: it counts as pending for wakes
                    conn.execute(
                        "UPDATE cursors SET provenance = 'explicit', queued_quiet = 0 WHERE watcher = ? AND target = ?",
                        (watcher, target),
                    )
                return True
            head = conn.execute(
                "SELECT last_sequence FROM heads WHERE session_key = ? AND agent_id = ?", (target, target_agent)
            ).fetchone()
            h = head[0] if head else 0
            queue_model.ensure_head(conn, watcher)
            conn.execute(
                "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance,"
                " updated_at) VALUES (?,?,?,?,?,?,?)",
                (watcher, target, h, h, h, provenance, now),
            )
        return True

    # twin: store/postgres_functions.sql::sw_unwatch (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_unwatch_drops_cursor_and_pending_notice_and_mutes_the_spawn_parent)
    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        with self._tx() as conn:
            queue_model.remove_slot(conn, watcher, target, queue_cap)
            deleted = conn.execute("DELETE FROM cursors WHERE target = ? AND watcher = ?", (target, watcher)).rowcount
            if conn.execute(
                "DELETE FROM system_events WHERE session_key = ? AND context_key = ?", (watcher, context_key)
            ).rowcount:
                queue_model.after_removal(conn, {watcher}, queue_cap)
            conn.execute(
                "INSERT INTO watch_mutes (watcher, target, created_at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (watcher, target, now),
            )
        return deleted > 0

    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]:
        sql, args = cursor_query(watcher, target, "?")
        with self._lock:
            return [Cursor(*r) for r in self._conn.execute(sql, args)]

    # twin: store/postgres_functions.sql::sw_ack (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once)
    def _ack(
        self, conn: sqlite3.Connection, watcher: str, targets: Sequence[str], render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        if len(targets) == 1:
            rows = conn.execute(_ACK_ONE, (now, watcher, targets[0])).fetchall()
        else:
            listed = json.dumps(list(targets))
            conn.execute(_ACK, (now, watcher, listed))
            rows = conn.execute(_ACKED, (watcher, listed)).fetchall()
        wakes: list[WakeRequest] = []
        order = {t: i for i, t in enumerate(targets)}
        rows.sort(key=lambda r: order[r[0]])  # reopen in the order the notices were consumed
        for target, last_seen, material, provenance in rows:
            if material > last_seen:  # material moved on after the notice froze: exactly one reopen
                quiet = provenance == "ambient-group"
                queue_model.append_notice(
                    conn, watcher, target, last_seen, render(target).context_key, now, queue_cap, quiet
                )
                if not quiet and not is_subagent_key(watcher):
                    wakes.append(WakeRequest(watcher, target))
        return wakes

    def acknowledge(
        self, watcher: str, targets: Sequence[str], render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        if not targets:
            return []
        with self._tx() as conn:
            return self._ack(conn, watcher, targets, render, now, queue_cap)

    # twin: store/postgres_functions.sql::sw_enqueue (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/queue.py::test_a_hand_queued_copy_of_a_pending_notice_is_deduped)
    def enqueue(
        self,
        session_key: str,
        text: str,
        context_key: str | None,
        ts: int,
        queue_cap: int,
        queue_only: bool = False,
        notice: tuple[str, int] | None = None,
    ) -> QueueEntry | None:
        with self._tx() as conn:
            if notice is not None and queue_model.slot_live(conn, session_key, notice[0], queue_cap) is not None:
                target, last_seen = notice
                if not queue_model.append_notice(
                    conn, session_key, target, last_seen, context_key or "", ts, queue_cap, queue_only
                ):
                    return None
                idx = conn.execute(
                    "SELECT queued_id FROM cursors WHERE target = ? AND watcher = ?", (target, session_key)
                ).fetchone()[0]
                return QueueEntry(idx, session_key, text, context_key, ts, queue_only, target=target)
            return queue_model.append_generic(conn, session_key, text, context_key, ts, queue_cap)

    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]:
        with self._read() as conn:
            return queue_model.entries(conn, session_key, render, queue_cap)

    # twin: store/postgres_functions.sql::sw_drain (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once)
    def drain(
        self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int, queue_cap: int
    ) -> Taken:
        with self._tx() as conn:
            leased = _live_leases(conn, session_key, now)
            if leased:  # another delivery holds some: take the others only
                free = {e.id for e in queue_model.entries(conn, session_key, render, queue_cap)} - leased
                entries = queue_model.remove_ids(conn, session_key, free, render, queue_cap)
            else:
                entries = queue_model.drain(conn, session_key, render, queue_cap)
            conn.execute("DELETE FROM queue_leases WHERE session_key = ? AND until <= ?", (session_key, now))
            targets = list(
                dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries) if t is not None)
            )
            wakes = self._ack(conn, session_key, targets, render, now, queue_cap) if targets else []
            withheld = bool(entries) and queue_model.has_withheld(conn, session_key, queue_cap)
        return Taken(entries, wakes, withheld)

    # twin: store/postgres_functions.sql::sw_drain (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/delivery.py::test_ack_removes_exactly_the_given_entries)
    def acknowledge_entries(
        self,
        session_key: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken:
        with self._tx() as conn:
            return self._take_ids(conn, session_key, set(ids), decode, render, now, queue_cap)

    def _take_ids(
        self,
        conn: sqlite3.Connection,
        session_key: str,
        ids: set[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken:
        entries = queue_model.remove_ids(conn, session_key, ids, render, queue_cap)
        if entries:  # their leases end with them (whoever held them: the entries were delivered)
            conn.execute(
                "DELETE FROM queue_leases WHERE session_key = ? AND eid IN (SELECT value FROM json_each(?))",
                (session_key, json.dumps([e.id for e in entries])),
            )
        targets = list(dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries) if t is not None))
        wakes = self._ack(conn, session_key, targets, render, now, queue_cap) if targets else []
        return Taken(entries, wakes, bool(entries) and queue_model.has_withheld(conn, session_key, queue_cap))

    # -- delivery leases ---------------------------------------------------------------------------
    # twin: store/postgres_functions.sql::sw_lease (bound by sessionwatch/testing/leases.py and
    #   sessionwatch/testing/leases.py::test_two_leases_never_share_an_entry)
    def lease(
        self, session_key: str, holder: str, render: Render, now: int, until: int, queue_cap: int = 20
    ) -> list[QueueEntry]:
        with self._tx() as conn:
            conn.execute("DELETE FROM queue_leases WHERE session_key = ? AND until <= ?", (session_key, now))
            held = {
                eid
                for (eid,) in conn.execute(
                    "SELECT eid FROM queue_leases WHERE session_key = ? AND holder <> ?", (session_key, holder)
                )
            }
            free = [e for e in queue_model.entries(conn, session_key, render, queue_cap) if e.id not in held]
            conn.executemany(
                "INSERT INTO queue_leases (session_key, eid, holder, until) VALUES (?,?,?,?)"
                " ON CONFLICT (session_key, eid) DO UPDATE SET holder = excluded.holder, until = excluded.until",
                [(session_key, e.id, holder, until) for e in free],
            )
        return free

    # twin: store/postgres_functions.sql::sw_renew_lease (bound by sessionwatch/testing/leases.py and
    #   sessionwatch/testing/leases.py::test_a_lease_taken_over_cannot_be_renewed_or_acknowledged)
    def renew_lease(self, session_key: str, holder: str, ids: Sequence[int], now: int, until: int) -> bool:
        wanted = sorted(set(ids))
        with self._tx() as conn:
            if not _holds(conn, session_key, holder, wanted):
                return False
            conn.execute(
                "UPDATE queue_leases SET until = ? WHERE session_key = ? AND holder = ?"
                " AND eid IN (SELECT value FROM json_each(?))",
                (until, session_key, holder, json.dumps(wanted)),
            )
        return True

    def release_lease(self, session_key: str, holder: str) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM queue_leases WHERE session_key = ? AND holder = ?", (session_key, holder))

    # twin: store/postgres_functions.sql::sw_settle (bound by sessionwatch/testing/leases.py and
    #   sessionwatch/testing/leases.py::test_acknowledging_a_lease_is_a_drain_of_its_entries)
    def acknowledge_leased(
        self,
        session_key: str,
        holder: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken | None:
        wanted = sorted(set(ids))
        with self._tx() as conn:
            if not _holds(conn, session_key, holder, wanted):
                return None
            conn.execute(  # rows of entries gone meanwhile (evicted, replaced) end here too
                "DELETE FROM queue_leases WHERE session_key = ? AND holder = ?"
                " AND eid IN (SELECT value FROM json_each(?))",
                (session_key, holder, json.dumps(wanted)),
            )
            return self._take_ids(conn, session_key, set(wanted), decode, render, now, queue_cap)

    # twin: store/postgres_functions.sql::sw_reconcile (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/delivery.py::test_a_truncated_page_leaves_one_notice_quoting_the_new_last_seen)
    def reconcile(
        self, watcher: str, target: str, after: int, last: int, render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        with self._lock:  # most reads are not a watcher's: answer those without taking the write lock
            seen = self._conn.execute(
                "SELECT last_seen FROM cursors WHERE target = ? AND watcher = ?", (target, watcher)
            ).fetchone()
        if seen is None or after > seen[0] or last <= seen[0]:
            return []
        with self._tx() as conn:
            row = conn.execute(
                "SELECT last_seen, material, provenance FROM cursors WHERE target = ? AND watcher = ?",
                (target, watcher),
            ).fetchone()
            if row is None or after > row[0] or last <= row[0]:
                return []  # not a watcher, a page that skipped events, or nothing new in it
            material, quiet = row[1], row[2] == "ambient-group"
            was_live = bool((queue_model.slot_live(conn, watcher, target, queue_cap) or (False, 0))[0])
            if material > last:  # notify-eligible events beyond the page: one notice, quoting the new position
                conn.execute(
                    "UPDATE cursors SET last_seen = ?1, notified = material, updated_at = ?2"
                    " WHERE target = ?3 AND watcher = ?4",
                    (last, now, target, watcher),
                )
                queue_model.append_notice(
                    conn, watcher, target, last, render(target).context_key, now, queue_cap, quiet
                )
                if not was_live and not quiet and not is_subagent_key(watcher):
                    return [WakeRequest(watcher, target)]
                return []
            conn.execute(
                "UPDATE cursors SET last_seen = ?1, notified = ?1, material = ?1, updated_at = ?2"
                " WHERE target = ?3 AND watcher = ?4",
                (last, now, target, watcher),
            )
            queue_model.remove_slot(conn, watcher, target, queue_cap)
        return []

    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        with self._read() as conn:
            return queue_model.has_pending_notice(conn, watcher, queue_cap)

    # twin: store/postgres_functions.sql::sw_sweep + store/postgres_functions.sql::sw_append_notices
    #   (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap)
    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        wakes: list[WakeRequest] = []
        with self._tx() as conn:
            rows = conn.execute(
                "UPDATE cursors SET notified = material, updated_at = ?1 WHERE material > last_seen"
                " AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = cursors.watcher)"
                " RETURNING watcher, target, last_seen, provenance",
                (now,),
            ).fetchall()
            rows.sort()
            targets = sorted({target for _, target, _, _ in rows})
            # Per target, not per pair: its slot key (set-based) and its notice's context key.
            slots = queue_model.slot_keys_of(conn, targets) if rows else {}
            contexts = {target: render(target).context_key for target in targets}
            for watcher, target, last_seen, provenance in rows:
                quiet = provenance == "ambient-group"
                queue_model.append_notice(
                    conn, watcher, target, last_seen, contexts[target], now, queue_cap, quiet, slots[target]
                )
                if not quiet and not is_subagent_key(watcher):
                    wakes.append(WakeRequest(watcher, target))
        return len(rows), wakes
