"""SQLite: the signal log (the ``SignalLog`` role): record, event reads and pages, heads, retention."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence

from ...keys import is_subagent_key
from ...kinds import NOTIFY_ELIGIBLE, SEEDING
from ..base import Render, SignalLog
from ..records import ChangesPage, EventInput, EventRecord, LogBounds, PruneResult, RecordOutcome, WakeRequest, loads
from ..rows import EVENT_COLS, event_body, event_from_row
from . import queue_model, upkeep
from .connection import SQLiteConnection

log = logging.getLogger("sessionwatch.store.sqlite")

PRUNE_BATCH = 1_000  # events deleted per prune transaction: about 30 ms at 5M rows, under the 50 ms budget
CURSOR_SLICE = 5_000  # cursor rows the stale-cursor cleanup examines per prune

# A dedupe key is unique per agent and origin (a client's or sessionwatch's own: kinds.py, migration 0008).
_INSERT_EVENT = (
    "INSERT INTO events (dedupe_key, client_dedupe, session_key, session_id, agent_id, kind, actor_type, actor_id,"
    " run_id, occurred_at, summary, body) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (agent_id, dedupe_key, client_dedupe) DO NOTHING RETURNING sequence"
)
_UPSERT_HEAD = (
    "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES (?,?,?,?)"
    " ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,"
    " updated_at = excluded.updated_at"
)
# The changesSince page as one JSON array, built by concatenating the stored bodies.
_CHANGES = (
    "SELECT '[' || group_concat('{\"sequence\":' || sequence || ',' || substr(body, 2), ',') || ']', count(*)"
    " FROM (SELECT sequence, body FROM events WHERE session_key = ? AND agent_id = ? AND sequence > ?"
    " ORDER BY sequence LIMIT ?)"
)
_SEED_CURSOR = (
    "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)"
    " VALUES (?1, ?2, ?3, ?3, ?3, 'explicit', ?4) ON CONFLICT (target, watcher) DO UPDATE SET"
    " last_seen = ?3, notified = ?3, material = ?3, updated_at = ?4"
)
# Is the cursor's queued notice live and quoting its current last_seen? (Then a material event's notice
# is a duplicate.) ?5 is the queue cap.
_NOTICE_QUEUED = (
    "EXISTS (SELECT 1 FROM queue_heads h WHERE h.session_key = cursors.watcher"
    " AND cursors.queued_idx > h.drained AND h.appended - cursors.queued_idx < ?5"
    " AND cursors.queued_ls = cursors.last_seen)"
)
# Material update for a producer-known watcher; creates the row (last_seen 0) when absent. Explicit rows
# whose notice must be (re)queued are marked queued_idx = -1 for the two statements that follow.
_MATERIAL_UPSERT = (
    "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at, queued_idx)"
    " VALUES (?1, ?2, 0, ?3, ?3, 'explicit', ?4, -1) ON CONFLICT (target, watcher) DO UPDATE SET"
    " notified = CASE WHEN notified = last_seen THEN ?3 ELSE notified END, material = ?3, updated_at = ?4,"
    " queued_idx = CASE WHEN provenance = 'explicit' AND NOT "
    + _NOTICE_QUEUED.replace("?5", "?6")
    + " THEN -1 ELSE queued_idx END"
)
# Material update for every registered watcher of the target except the actor (self-suppression).
# material < ?1 skips rows the producer upsert above already moved to this sequence.
_MATERIAL_UPDATE = (
    "UPDATE cursors SET notified = CASE WHEN notified = last_seen THEN ?1 ELSE notified END,"
    " material = ?1, updated_at = ?2,"
    " queued_idx = CASE WHEN provenance = 'explicit' AND NOT " + _NOTICE_QUEUED + " THEN -1 ELSE queued_idx END"
    " WHERE target = ?3 AND material < ?1 AND watcher IS NOT ?4"
)
# Append the marked notices: bump each marked watcher's head (next index; the target's slot key becomes
# its newest slot, the one before kept in prev_slot), then fill the slots from their heads, each linked
# to the watcher's previous newest slot (queue_model: the chain). Integers, not key text, in these rows:
# the widest fan-out rewrites every head and slot row, and a key in each cost 13% there.
_BUMP_HEADS = (
    "UPDATE queue_heads SET appended = appended + 1, prev_slot = last_slot,"
    " last_slot = (SELECT id FROM slot_keys WHERE target = ?1)"
    " WHERE session_key IN (SELECT watcher FROM cursors WHERE target = ?1 AND queued_idx = -1)"
)
_FILL_SLOTS = (
    "UPDATE cursors SET queued_idx = h.appended, queued_id = h.appended, queued_prev = h.prev_slot,"
    " queued_ls = last_seen, queued_ts = ?2, queued_quiet = 0 FROM queue_heads h"
    " WHERE h.session_key = cursors.watcher AND cursors.target = ?1 AND cursors.queued_idx = -1"
)
# A target's first requeue ever: its slot key did not exist during the bump.
_LATE_KEY = (
    "UPDATE queue_heads SET last_slot = ?2 WHERE session_key IN"
    " (SELECT watcher FROM cursors WHERE target = ?1 AND queued_idx = -1)"
)
# Explicit rows about to be re-marked whose live notice quotes an older last_seen (after a re-seed or an
# acknowledge that consumed nothing): their old entry is taken out first, so the append that replaces it
# does not evict an older entry of the queue. ?1 target, ?2 actor, ?3 queue cap.
_STALE_SLOTS = (
    "SELECT c.watcher FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher"
    " WHERE c.target = ?1 AND c.provenance = 'explicit' AND c.watcher IS NOT ?2 AND c.queued_ls <> c.last_seen"
    " AND c.queued_idx > h.drained AND h.appended - c.queued_idx < ?3"
)
_AMBIENT_MOVED = (
    "SELECT watcher, last_seen FROM cursors WHERE target = ? AND material = ? AND provenance = 'ambient-group'"
)
_WAKE_WATCHERS = "SELECT watcher FROM cursors WHERE target = ? AND material = ? AND provenance = 'explicit'"


class SQLiteLog(SQLiteConnection, SignalLog):
    # twin: store/postgres_functions.sql::sw_record (bound by sessionwatch/testing/stateful.py,
    #   sessionwatch/testing/watchers.py::test_acknowledge_on_drain_reopens_exactly_once and
    #   sessionwatch/testing/agent_scope.py)
    def record(
        self, ev: EventInput, render: Render, now: int, queue_cap: int, want_wakes: bool
    ) -> RecordOutcome | None:
        key = ev.session_key
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if (
                    ev.only_if_watched
                    and conn.execute("SELECT 1 FROM cursors WHERE target = ? LIMIT 1", (key,)).fetchone() is None
                ):
                    conn.execute("ROLLBACK")
                    return None
                if (
                    ev.expected_link is not None
                    and conn.execute(
                        "SELECT 1 FROM upstream_links WHERE session_key = ? AND agent_id = ? AND updated_at = ?"
                        " AND upstream_ref_json = ?",
                        (key, ev.agent_id, *ev.expected_link),
                    ).fetchone()
                    is None
                ):
                    conn.execute("ROLLBACK")
                    return None
                row = conn.execute(
                    _INSERT_EVENT,
                    (
                        ev.dedupe_key,
                        int(ev.client_dedupe),
                        key,
                        ev.session_id,
                        ev.agent_id,
                        ev.kind,
                        ev.actor_type,
                        ev.actor_id,
                        ev.run_id,
                        ev.occurred_at,
                        ev.summary,
                        event_body(ev),
                    ),
                ).fetchone()
                if row is None:
                    existing = conn.execute(
                        f"SELECT {EVENT_COLS} FROM events WHERE agent_id = ? AND dedupe_key = ? AND client_dedupe = ?",
                        (ev.agent_id, ev.dedupe_key, int(ev.client_dedupe)),
                    ).fetchone()
                    conn.execute("COMMIT")
                    return RecordOutcome(None if existing is None else event_from_row(existing), False)
                seq = row[0]
                conn.execute(_UPSERT_HEAD, (key, ev.agent_id, seq, now))
                wakes: list[WakeRequest] = []
                if ev.kind in SEEDING:
                    for w in ev.watchers:
                        queue_model.ensure_head(conn, w)
                        conn.execute(_SEED_CURSOR, (w, key, seq, now))
                        conn.execute("DELETE FROM watch_mutes WHERE watcher = ? AND target = ?", (w, key))
                elif ev.kind in NOTIFY_ELIGIBLE:
                    for (w,) in conn.execute(_STALE_SLOTS, (key, ev.actor_id, queue_cap)).fetchall():
                        queue_model.remove_slot(conn, w, key, queue_cap)
                    moved = 0
                    for w in ev.watchers:
                        if (
                            w == ev.actor_id
                            or conn.execute(
                                "SELECT 1 FROM watch_mutes WHERE watcher = ? AND target = ?", (w, key)
                            ).fetchone()
                        ):
                            continue
                        queue_model.ensure_head(conn, w)
                        conn.execute(_MATERIAL_UPSERT, (w, key, seq, now, None, queue_cap))
                        moved += 1
                    moved += conn.execute(_MATERIAL_UPDATE, (seq, now, key, ev.actor_id, queue_cap)).rowcount
                    if moved:
                        if conn.execute(_BUMP_HEADS, (key,)).rowcount:
                            if conn.execute("SELECT 1 FROM slot_keys WHERE target = ?", (key,)).fetchone() is None:
                                conn.execute(_LATE_KEY, (key, queue_model.slot_key(conn, key)))
                            conn.execute(_FILL_SLOTS, (key, now))
                        ctx = None
                        for w, last_seen in conn.execute(_AMBIENT_MOVED, (key, seq)).fetchall():
                            ctx = ctx or render(key).context_key
                            queue_model.append_notice(conn, w, key, last_seen, ctx, now, queue_cap, quiet=True)
                        if want_wakes:
                            wakes = [
                                WakeRequest(w, key)
                                for (w,) in conn.execute(_WAKE_WATCHERS, (key, seq))
                                if not is_subagent_key(w)
                            ]
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return RecordOutcome(
            EventRecord(
                seq,
                key,
                ev.agent_id,
                ev.kind,
                ev.actor_type,
                ev.occurred_at,
                ev.summary,
                ev.actor_id,
                ev.session_id,
                ev.run_id,
                ev.dedupe_key,
                ev.payload,
            ),
            True,
            wakes,
        )

    # twin: store/postgres_functions.sql::sw_changes (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/reconciliation.py::test_history_gap_and_earliest_through_the_tool)
    def changes_since(self, session_key: str, agent_id: str, after: int, limit: int) -> ChangesPage:
        with self._read() as conn:
            page, count = conn.execute(_CHANGES, (session_key, agent_id, after, limit + 1)).fetchone()
            head = conn.execute(
                "SELECT last_sequence, pruned_max_sequence FROM heads WHERE session_key = ? AND agent_id = ?",
                (session_key, agent_id),
            ).fetchone()
            earliest = conn.execute(
                "SELECT min(sequence) FROM events WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)
            ).fetchone()[0]
        events = loads(page) if count else []
        if count > limit:
            events.pop()
        last, pruned = head if head else (0, 0)
        if earliest is None:
            earliest = last + 1 if last > 0 else 0
        return ChangesPage(events, count > limit, earliest, after < pruned)

    def events_after(self, after: int, limit: int, agents: Sequence[str] | None = None) -> list[EventRecord]:
        with self._lock:
            if agents is not None:
                return [
                    event_from_row(r)
                    for r in self._conn.execute(
                        f"SELECT {EVENT_COLS} FROM events WHERE sequence > ?"
                        " AND agent_id IN (SELECT value FROM json_each(?)) ORDER BY sequence LIMIT ?",
                        (after, json.dumps(list(agents)), limit),
                    )
                ]
            return [
                event_from_row(r)
                for r in self._conn.execute(
                    f"SELECT {EVENT_COLS} FROM events WHERE sequence > ? ORDER BY sequence LIMIT ?", (after, limit)
                )
            ]

    def log_bounds(self, agents: Sequence[str] | None = None, session: tuple[str, str] | None = None) -> LogBounds:
        if session is not None:
            where, args = "session_key = ? AND agent_id = ?", list(session)
        elif agents is not None:
            where, args = "agent_id IN (SELECT value FROM json_each(?))", [json.dumps(list(agents))]
        else:
            where, args = "1 = 1", []
        with self._read() as conn:
            last, pruned = conn.execute(
                f"SELECT coalesce(max(last_sequence), 0), coalesce(max(pruned_max_sequence), 0)"
                f" FROM heads WHERE {where}",
                args,
            ).fetchone()
            first, top = conn.execute(f"SELECT min(sequence), max(sequence) FROM events WHERE {where}", args).fetchone()
            pruned_at = conn.execute("SELECT value FROM meta WHERE key = 'last_prune_at'").fetchone()
        last = max(last, top or 0)
        return LogBounds(
            first if first is not None else (last + 1 if last else 0),
            last,
            pruned,
            int(pruned_at[0]) if pruned_at else None,
        )

    def state_version(self, session_key: str, agent_id: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT last_sequence FROM heads WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)
            ).fetchone()
        return row[0] if row else 0

    def state_versions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        keys = sorted({k for k, _ in pairs})
        with self._read() as conn:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                for k, a, v in conn.execute(
                    "SELECT session_key, agent_id, last_sequence FROM heads WHERE session_key IN"
                    f" ({','.join('?' * len(chunk))})",
                    chunk,
                ):
                    out[(k, a)] = v
        return {p: out[p] for p in pairs if p in out}

    # twin: store/postgres_functions.sql::sw_prune and sw_prune_step (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/sweep_prune.py::test_pruning_after_recording_is_throttled_to_once_an_hour)
    def prune(
        self,
        now: int,
        retention_ms: int,
        max_rows: int,
        *,
        force: bool,
        interval_ms: int,
        queue_cap: int = 20,
        expire_cursors: bool = True,
    ) -> PruneResult:
        """Age, then cap, then a slice of the stale-cursor cleanup; each delete is its own short
        transaction of at most PRUNE_BATCH rows, so a recording never waits long for the writer lock."""
        result = PruneResult()
        cutoff = now - retention_ms
        with self._tx() as conn:
            if not force:
                last = conn.execute("SELECT value FROM meta WHERE key = 'last_prune_at'").fetchone()
                if last is not None and now - int(last[0]) < interval_ms:
                    result.skipped = True
                    return result
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('last_prune_at', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(now),),
            )
        # Age: the time index finds the old rows (an index probe when nothing is old).
        while True:
            with self._tx() as conn:
                seqs = [
                    s
                    for (s,) in conn.execute(
                        "SELECT sequence FROM events WHERE occurred_at < ? LIMIT ?", (cutoff, PRUNE_BATCH)
                    )
                ]
                if not seqs:
                    break
                listed = json.dumps(seqs)
                result.heads_stamped += self._stamp(conn, "sequence IN (SELECT value FROM json_each(?))", listed)
                conn.execute("DELETE FROM events WHERE sequence IN (SELECT value FROM json_each(?))", (listed,))
                result.rows_deleted += len(seqs)
                upkeep.forget_rows(conn, seqs)
            if len(seqs) < PRUNE_BATCH:
                break
        # Cap: the row count is kept (upkeep.event_rows), the boundary found by walking from the old end.
        while True:
            with self._tx() as conn:
                over = upkeep.event_rows(conn) - max_rows
                if over <= 0:
                    break
                boundary = conn.execute(
                    "SELECT sequence FROM events ORDER BY sequence LIMIT 1 OFFSET ?", (min(over, PRUNE_BATCH) - 1,)
                ).fetchone()[0]
                result.heads_stamped += self._stamp(conn, "sequence <= ?", boundary)
                seqs = [
                    s for (s,) in conn.execute("DELETE FROM events WHERE sequence <= ? RETURNING sequence", (boundary,))
                ]
                result.rows_deleted += len(seqs)
                upkeep.forget_rows(conn, seqs)
        # Stale cursors: a bounded slice per prune, resuming where the last one stopped (an index on
        # updated_at would cost a write on every fan-out and ack).
        if not expire_cursors:
            return result
        with self._tx() as conn:
            expired = upkeep.expire_cursors(conn, cutoff, CURSOR_SLICE)
            result.cursors_deleted = len(expired)
            if expired:
                queue_model.after_removal(conn, set(expired), queue_cap)
        return result

    @staticmethod
    def _stamp(conn: sqlite3.Connection, where: str, arg: int | str) -> int:
        # NOT INDEXED: the rows come by sequence (the rowid); grouping through events_by_session instead
        # would walk the whole log.
        return conn.execute(
            "UPDATE heads SET pruned_max_sequence = m.mx FROM (SELECT session_key, agent_id, max(sequence) AS mx"
            f" FROM events NOT INDEXED WHERE {where} GROUP BY session_key, agent_id) AS m"
            " WHERE heads.session_key = m.session_key AND heads.agent_id = m.agent_id"
            " AND m.mx > heads.pruned_max_sequence",
            (arg,),
        ).rowcount
