"""SQLite backend: one file, WAL, one transaction per write, set-based fan-out.

This module holds the signal log, cursors and the notice queue's transactions; the queue's derived
model is in ``sqlite_queue``, sessions and transcripts in ``sqlite_sessions``, links and nodes in
``sqlite_links`` (mixins of ``SQLiteStore``)."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ..kinds import NOTIFY_ELIGIBLE, SEEDING
from ..keys import is_agent_qualified, is_subagent_key
from . import sqlite_queue as sq
from . import sqlite_upkeep as up
from .base import Render, Store
from .records import (ChangesPage, Cursor, EventInput, EventRecord, LogBounds, PruneResult, QueueEntry, RecordOutcome,
                      WakeRequest, loads)
from .rows import EVENT_COLS, cursor_query, event_body, event_from_row

from .data_settings import SQLiteDataSettings
from .sqlite_links import LinksMixin
from .sqlite_sessions import SessionsMixin
from .sqlite_tokens import TokensMixin

log = logging.getLogger("sessionwatch.store.sqlite")

PRUNE_BATCH = 1_000  # events deleted per prune transaction: about 30 ms at 5M rows, under the 50 ms budget
CURSOR_SLICE = 5_000  # cursor rows the stale-cursor cleanup examines per prune

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=OFF",
    # A checkpoint runs inside the commit that crosses this many WAL pages (40 MB): rarer, larger
    # checkpoints keep the fsync off all but a few recordings. journal_size_limit trims the file after.
    "PRAGMA wal_autocheckpoint=10000",
    "PRAGMA journal_size_limit=67108864",
)

_INSERT_EVENT = (
    "INSERT INTO events (dedupe_key, session_key, session_id, agent_id, kind, actor_type, actor_id, run_id,"
    " occurred_at, summary, body) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (dedupe_key) DO NOTHING RETURNING sequence")
_UPSERT_HEAD = (
    "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES (?,?,?,?)"
    " ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,"
    " updated_at = excluded.updated_at")
# The changesSince page as one JSON array, built by concatenating the stored bodies.
_CHANGES = (
    "SELECT '[' || group_concat('{\"sequence\":' || sequence || ',' || substr(body, 2), ',') || ']', count(*)"
    " FROM (SELECT sequence, body FROM events WHERE session_key = ? AND agent_id = ? AND sequence > ?"
    " ORDER BY sequence LIMIT ?)")
_SEED_CURSOR = (
    "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)"
    " VALUES (?1, ?2, ?3, ?3, ?3, 'explicit', ?4) ON CONFLICT (target, watcher) DO UPDATE SET"
    " last_seen = ?3, notified = ?3, material = ?3, updated_at = ?4")
# Is the cursor's queued notice live and quoting its current last_seen? (Then a material event's notice
# is a duplicate.) ?5 is the queue cap.
_NOTICE_QUEUED = (
    "EXISTS (SELECT 1 FROM queue_heads h WHERE h.session_key = cursors.watcher"
    " AND cursors.queued_idx > h.drained AND h.appended - cursors.queued_idx < ?5"
    " AND cursors.queued_ls = cursors.last_seen)")
# Material update for a producer-known watcher; creates the row (last_seen 0) when absent. Explicit rows
# whose notice must be (re)queued are marked queued_idx = -1 for the two statements that follow.
_MATERIAL_UPSERT = (
    "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at, queued_idx)"
    " VALUES (?1, ?2, 0, ?3, ?3, 'explicit', ?4, -1) ON CONFLICT (target, watcher) DO UPDATE SET"
    " notified = CASE WHEN notified = last_seen THEN ?3 ELSE notified END, material = ?3, updated_at = ?4,"
    " queued_idx = CASE WHEN provenance = 'explicit' AND NOT " + _NOTICE_QUEUED.replace("?5", "?6")
    + " THEN -1 ELSE queued_idx END")
# Material update for every registered watcher of the target except the actor (self-suppression).
# material < ?1 skips rows the producer upsert above already moved to this sequence.
_MATERIAL_UPDATE = (
    "UPDATE cursors SET notified = CASE WHEN notified = last_seen THEN ?1 ELSE notified END,"
    " material = ?1, updated_at = ?2,"
    " queued_idx = CASE WHEN provenance = 'explicit' AND NOT " + _NOTICE_QUEUED + " THEN -1 ELSE queued_idx END"
    " WHERE target = ?3 AND material < ?1 AND watcher IS NOT ?4")
# Append the marked notices: bump each marked watcher's head (next index; the target's slot key becomes
# its newest slot, the one before kept in prev_slot), then fill the slots from their heads, each linked
# to the watcher's previous newest slot (sqlite_queue: the chain). Integers, not key text, in these rows:
# the widest fan-out rewrites every head and slot row, and a key in each cost 13% there.
_BUMP_HEADS = ("UPDATE queue_heads SET appended = appended + 1, prev_slot = last_slot,"
               " last_slot = (SELECT id FROM slot_keys WHERE target = ?1)"
               " WHERE session_key IN (SELECT watcher FROM cursors WHERE target = ?1 AND queued_idx = -1)")
_FILL_SLOTS = (
    "UPDATE cursors SET queued_idx = h.appended, queued_id = h.appended, queued_prev = h.prev_slot,"
    " queued_ls = last_seen, queued_ts = ?2, queued_quiet = 0 FROM queue_heads h"
    " WHERE h.session_key = cursors.watcher AND cursors.target = ?1 AND cursors.queued_idx = -1")
# A target's first requeue ever: its slot key did not exist during the bump.
_LATE_KEY = ("UPDATE queue_heads SET last_slot = ?2 WHERE session_key IN"
             " (SELECT watcher FROM cursors WHERE target = ?1 AND queued_idx = -1)")
# Explicit rows about to be re-marked whose live notice quotes an older last_seen (after a re-seed or an
# acknowledge that consumed nothing): their old entry is taken out first, so the append that replaces it
# does not evict an older entry of the queue. ?1 target, ?2 actor, ?3 queue cap.
_STALE_SLOTS = (
    "SELECT c.watcher FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher"
    " WHERE c.target = ?1 AND c.provenance = 'explicit' AND c.watcher IS NOT ?2 AND c.queued_ls <> c.last_seen"
    " AND c.queued_idx > h.drained AND h.appended - c.queued_idx < ?3")
_AMBIENT_MOVED = ("SELECT watcher, last_seen FROM cursors WHERE target = ? AND material = ?"
                  " AND provenance = 'ambient-group'")
_WAKE_WATCHERS = "SELECT watcher FROM cursors WHERE target = ? AND material = ? AND provenance = 'explicit'"
# Several targets: the update, then its rows read back by key. (With RETURNING, SQLite 3.40 stopped using
# the IN list as key lookups and visited every cursor of the watcher: 81 µs at 10k targets instead of 8.)
_ACK = (
    "UPDATE cursors SET last_seen = notified, notified = max(material, notified), updated_at = ?1"
    " WHERE watcher = ?2 AND target IN (SELECT value FROM json_each(?3))")
_ACKED = ("SELECT target, last_seen, material, provenance FROM cursors"
          " WHERE watcher = ?1 AND target IN (SELECT value FROM json_each(?2))")
_ACK_ONE = (
    "UPDATE cursors SET last_seen = notified, notified = max(material, notified), updated_at = ?1"
    " WHERE target = ?3 AND watcher = ?2 RETURNING target, last_seen, material, provenance")


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db`` or a plain path -> filesystem path.

    ``sqlite://x.db`` (two slashes) names a host in the URL convention, which SQLite has none of: it is
    refused rather than guessed at."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url[len("sqlite:///"):]
    if url.lower().startswith("sqlite:"):
        raise InvalidArgument(f"store URL {url!r} is not sqlite:///relative.db or sqlite:////absolute.db "
                              "(three slashes before a relative path, four before an absolute one)")
    return url


def _prepare_file(path: str) -> bool:
    """Check the store file's folder; returns True when the file does not exist yet (it will be created).

    Only the per-user default folder is created: any other missing folder is most likely a typo, so it
    is an error that creates nothing."""
    from . import default_sqlite_path

    file = Path(path)
    folder = file.parent
    if not folder.is_dir():
        if file.absolute() == default_sqlite_path().absolute():
            folder.mkdir(parents=True, exist_ok=True)
        elif folder.exists():
            raise InvalidArgument(f"cannot create the store file {file}: {folder} is not a folder")
        else:
            raise InvalidArgument(f"the folder of the store file {file} does not exist: create it first "
                                  f"(mkdir -p {folder})")
    return not file.exists()


def apply_migrations(conn: sqlite3.Connection) -> int:
    """Apply numbered migration files newer than ``PRAGMA user_version``; safe with concurrent openers."""
    folder: Any = Path(__file__).parent / "migrations" / "sqlite"  # beside the module in any normal install
    if not folder.is_dir():  # a zipped install: ask importlib (slower to import, so only then)
        from importlib import resources

        folder = resources.files("sessionwatch.store").joinpath("migrations/sqlite")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if files and current >= int(files[-1].name.split("_", 1)[0]):
        return current  # up to date: no write lock (short-lived clients such as a hook open stores often)
    conn.execute("BEGIN IMMEDIATE")  # serializes concurrent starts; the version is re-read under the lock
    try:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        for f in files:
            version = int(f.name.split("_", 1)[0])
            if version > current:
                for statement in f.read_text().split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={version}")
                current = version
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current


class SQLiteStore(SessionsMixin, LinksMixin, TokensMixin, SQLiteDataSettings, Store):
    """The embedded default backend. Thread-safe: one connection behind a lock."""

    multi_process = False

    def __init__(self, url: str) -> None:
        self.url = url
        path = sqlite_path(url)
        self.created = False  # True when this process created the file (faces say so once)
        if path != ":memory:":
            path = str(Path(path).expanduser())
            self.created = _prepare_file(path)
        self.path = path
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=512)
        for pragma in PRAGMAS:
            self._conn.execute(pragma)
        self.schema_version = apply_migrations(self._conn)

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            self._conn.close()

    # -- helpers ---------------------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # -- signal log ------------------------------------------------------------------------------
    # twin: store/postgres_functions.sql::sw_record (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_watchers.py::test_acknowledge_on_drain_reopens_exactly_once)
    def record(self, ev: EventInput, render: Render, now: int, queue_cap: int,
               want_wakes: bool) -> RecordOutcome | None:
        key = ev.session_key
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if ev.only_if_watched and conn.execute(
                        "SELECT 1 FROM cursors WHERE target = ? LIMIT 1", (key,)).fetchone() is None:
                    conn.execute("ROLLBACK")
                    return None
                if ev.expected_link is not None and conn.execute(
                        "SELECT 1 FROM upstream_links WHERE session_key = ? AND agent_id = ? AND updated_at = ?"
                        " AND upstream_ref_json = ?", (key, ev.agent_id, *ev.expected_link)).fetchone() is None:
                    conn.execute("ROLLBACK")
                    return None
                row = conn.execute(_INSERT_EVENT, (ev.dedupe_key, key, ev.session_id, ev.agent_id, ev.kind,
                                                   ev.actor_type, ev.actor_id, ev.run_id, ev.occurred_at,
                                                   ev.summary, event_body(ev))).fetchone()
                if row is None:
                    existing = conn.execute(f"SELECT {EVENT_COLS} FROM events WHERE dedupe_key = ?",
                                            (ev.dedupe_key,)).fetchone()
                    conn.execute("COMMIT")
                    return RecordOutcome(None if existing is None else event_from_row(existing), False)
                seq = row[0]
                conn.execute(_UPSERT_HEAD, (key, ev.agent_id, seq, now))
                wakes: list[WakeRequest] = []
                if ev.kind in SEEDING:
                    for w in ev.watchers:
                        sq.ensure_head(conn, w)
                        conn.execute(_SEED_CURSOR, (w, key, seq, now))
                        conn.execute("DELETE FROM watch_mutes WHERE watcher = ? AND target = ?", (w, key))
                elif ev.kind in NOTIFY_ELIGIBLE:
                    for (w,) in conn.execute(_STALE_SLOTS, (key, ev.actor_id, queue_cap)).fetchall():
                        sq.remove_slot(conn, w, key, queue_cap)
                    moved = 0
                    for w in ev.watchers:
                        if w == ev.actor_id or conn.execute(
                                "SELECT 1 FROM watch_mutes WHERE watcher = ? AND target = ?", (w, key)).fetchone():
                            continue
                        sq.ensure_head(conn, w)
                        conn.execute(_MATERIAL_UPSERT, (w, key, seq, now, None, queue_cap))
                        moved += 1
                    moved += conn.execute(_MATERIAL_UPDATE, (seq, now, key, ev.actor_id, queue_cap)).rowcount
                    if moved:
                        if conn.execute(_BUMP_HEADS, (key,)).rowcount:
                            if conn.execute("SELECT 1 FROM slot_keys WHERE target = ?", (key,)).fetchone() is None:
                                conn.execute(_LATE_KEY, (key, sq.slot_key(conn, key)))
                            conn.execute(_FILL_SLOTS, (key, now))
                        ctx = None
                        for w, last_seen in conn.execute(_AMBIENT_MOVED, (key, seq)).fetchall():
                            ctx = ctx or render(key).context_key
                            sq.append_notice(conn, w, key, last_seen, ctx, now, queue_cap, quiet=True)
                        if want_wakes:
                            wakes = [WakeRequest(w, key) for (w,) in conn.execute(_WAKE_WATCHERS, (key, seq))
                                     if not is_subagent_key(w)]
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return RecordOutcome(EventRecord(seq, key, ev.agent_id, ev.kind, ev.actor_type, ev.occurred_at,
                                         ev.summary, ev.actor_id, ev.session_id, ev.run_id, ev.dedupe_key,
                                         ev.payload), True, wakes)

    def changes_since(self, session_key: str, agent_id: str, after: int, limit: int) -> ChangesPage:
        with self._read() as conn:
            page, count = conn.execute(_CHANGES, (session_key, agent_id, after, limit + 1)).fetchone()
            head = conn.execute("SELECT last_sequence, pruned_max_sequence FROM heads"
                                " WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)).fetchone()
            earliest = conn.execute("SELECT min(sequence) FROM events WHERE session_key = ? AND agent_id = ?",
                                    (session_key, agent_id)).fetchone()[0]
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
                return [event_from_row(r) for r in self._conn.execute(
                    f"SELECT {EVENT_COLS} FROM events WHERE sequence > ?"
                    " AND agent_id IN (SELECT value FROM json_each(?)) ORDER BY sequence LIMIT ?",
                    (after, json.dumps(list(agents)), limit))]
            return [event_from_row(r) for r in self._conn.execute(
                f"SELECT {EVENT_COLS} FROM events WHERE sequence > ? ORDER BY sequence LIMIT ?", (after, limit))]

    def log_bounds(self, agents: Sequence[str] | None = None,
                   session: tuple[str, str] | None = None) -> LogBounds:
        if session is not None:
            where, args = "session_key = ? AND agent_id = ?", list(session)
        elif agents is not None:
            where, args = "agent_id IN (SELECT value FROM json_each(?))", [json.dumps(list(agents))]
        else:
            where, args = "1 = 1", []
        with self._read() as conn:
            last, pruned = conn.execute(f"SELECT coalesce(max(last_sequence), 0), coalesce(max(pruned_max_sequence), 0)"
                                        f" FROM heads WHERE {where}", args).fetchone()
            first, top = conn.execute(f"SELECT min(sequence), max(sequence) FROM events WHERE {where}",
                                      args).fetchone()
            pruned_at = conn.execute("SELECT value FROM meta WHERE key = 'last_prune_at'").fetchone()
        last = max(last, top or 0)
        return LogBounds(first if first is not None else (last + 1 if last else 0), last, pruned,
                         int(pruned_at[0]) if pruned_at else None)

    def state_version(self, session_key: str, agent_id: str) -> int:
        with self._lock:
            row = self._conn.execute("SELECT last_sequence FROM heads WHERE session_key = ? AND agent_id = ?",
                                     (session_key, agent_id)).fetchone()
        return row[0] if row else 0

    def state_versions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        keys = sorted({k for k, _ in pairs})
        with self._read() as conn:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                for k, a, v in conn.execute(
                        "SELECT session_key, agent_id, last_sequence FROM heads WHERE session_key IN"
                        f" ({','.join('?' * len(chunk))})", chunk):
                    out[(k, a)] = v
        return {p: out[p] for p in pairs if p in out}

    # twin: store/postgres_functions.sql::sw_prune and sw_prune_step (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_sweep_prune.py::test_pruning_after_recording_is_throttled_to_once_an_hour)
    def prune(self, now: int, retention_ms: int, max_rows: int, *, force: bool, interval_ms: int,
              queue_cap: int = 20,
              expire_cursors: bool = True) -> PruneResult:
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
            conn.execute("INSERT INTO meta (key, value) VALUES ('last_prune_at', ?)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(now),))
        # Age: the time index finds the old rows (an index probe when nothing is old).
        while True:
            with self._tx() as conn:
                seqs = [s for (s,) in conn.execute("SELECT sequence FROM events WHERE occurred_at < ? LIMIT ?",
                                                   (cutoff, PRUNE_BATCH))]
                if not seqs:
                    break
                listed = json.dumps(seqs)
                result.heads_stamped += self._stamp(conn, "sequence IN (SELECT value FROM json_each(?))", listed)
                conn.execute("DELETE FROM events WHERE sequence IN (SELECT value FROM json_each(?))", (listed,))
                result.rows_deleted += len(seqs)
                up.forget_rows(conn, seqs)
            if len(seqs) < PRUNE_BATCH:
                break
        # Cap: the row count is kept (sq.event_rows), the boundary found by walking from the old end.
        while True:
            with self._tx() as conn:
                over = up.event_rows(conn) - max_rows
                if over <= 0:
                    break
                boundary = conn.execute("SELECT sequence FROM events ORDER BY sequence LIMIT 1 OFFSET ?",
                                        (min(over, PRUNE_BATCH) - 1,)).fetchone()[0]
                result.heads_stamped += self._stamp(conn, "sequence <= ?", boundary)
                seqs = [s for (s,) in conn.execute("DELETE FROM events WHERE sequence <= ? RETURNING sequence",
                                                   (boundary,))]
                result.rows_deleted += len(seqs)
                up.forget_rows(conn, seqs)
        # Stale cursors: a bounded slice per prune, resuming where the last one stopped (an index on
        # updated_at would cost a write on every fan-out and ack).
        if not expire_cursors:
            return result
        with self._tx() as conn:
            expired = up.expire_cursors(conn, cutoff, CURSOR_SLICE)
            result.cursors_deleted = len(expired)
            if expired:
                sq.after_removal(conn, set(expired), queue_cap)
        return result

    @staticmethod
    def _stamp(conn: sqlite3.Connection, where: str, arg: int | str) -> int:
        # NOT INDEXED: the rows come by sequence (the rowid); grouping through events_by_session instead
        # would walk the whole log.
        return conn.execute(
            "UPDATE heads SET pruned_max_sequence = m.mx FROM (SELECT session_key, agent_id, max(sequence) AS mx"
            f" FROM events NOT INDEXED WHERE {where} GROUP BY session_key, agent_id) AS m"
            " WHERE heads.session_key = m.session_key AND heads.agent_id = m.agent_id"
            " AND m.mx > heads.pruned_max_sequence", (arg,)).rowcount

    # -- cursors and the queue -------------------------------------------------------------------
    # twin: store/postgres_functions.sql::sw_register (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_watchers.py::test_an_explicit_watch_promotes_ambient_and_keeps_watermarks)
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        if watcher == target or not is_agent_qualified(watcher) or not is_agent_qualified(target):
            return False
        with self._tx() as conn:
            if provenance != "explicit" and conn.execute(
                    "SELECT 1 FROM watch_mutes WHERE watcher = ? AND target = ?", (watcher, target)).fetchone():
                return False
            existing = conn.execute("SELECT provenance FROM cursors WHERE watcher = ? AND target = ?",
                                    (watcher, target)).fetchone()
            if provenance == "explicit":
                conn.execute("DELETE FROM watch_mutes WHERE watcher = ? AND target = ?", (watcher, target))
            if existing is not None:
                if existing[0] == "ambient-group" and provenance == "explicit":
                    # its queued notice stops being queue-only too: it counts as pending for wakes
                    conn.execute("UPDATE cursors SET provenance = 'explicit', queued_quiet = 0"
                                 " WHERE watcher = ? AND target = ?", (watcher, target))
                return True
            head = conn.execute("SELECT last_sequence FROM heads WHERE session_key = ? AND agent_id = ?",
                                (target, target_agent)).fetchone()
            h = head[0] if head else 0
            sq.ensure_head(conn, watcher)
            conn.execute("INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance,"
                         " updated_at) VALUES (?,?,?,?,?,?,?)", (watcher, target, h, h, h, provenance, now))
        return True

    # twin: store/postgres_functions.sql::sw_unwatch (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_watchers.py::test_unwatch_drops_cursor_and_pending_notice_and_mutes_the_spawn_parent)
    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        with self._tx() as conn:
            sq.remove_slot(conn, watcher, target, queue_cap)
            deleted = conn.execute("DELETE FROM cursors WHERE target = ? AND watcher = ?",
                                   (target, watcher)).rowcount
            if conn.execute("DELETE FROM system_events WHERE session_key = ? AND context_key = ?",
                            (watcher, context_key)).rowcount:
                sq.after_removal(conn, {watcher}, queue_cap)
            conn.execute("INSERT INTO watch_mutes (watcher, target, created_at) VALUES (?,?,?)"
                         " ON CONFLICT DO NOTHING", (watcher, target, now))
        return deleted > 0

    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]:
        sql, args = cursor_query(watcher, target, "?")
        with self._lock:
            return [Cursor(*r) for r in self._conn.execute(sql, args)]

    # twin: store/postgres_functions.sql::sw_ack (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_watchers.py::test_acknowledge_on_drain_reopens_exactly_once)
    def _ack(self, conn: sqlite3.Connection, watcher: str, targets: Sequence[str], render: Render, now: int,
             queue_cap: int) -> list[WakeRequest]:
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
                sq.append_notice(conn, watcher, target, last_seen, render(target).context_key, now, queue_cap, quiet)
                if not quiet and not is_subagent_key(watcher):
                    wakes.append(WakeRequest(watcher, target))
        return wakes

    def acknowledge(self, watcher: str, targets: Sequence[str], render: Render, now: int,
                    queue_cap: int) -> list[WakeRequest]:
        if not targets:
            return []
        with self._tx() as conn:
            return self._ack(conn, watcher, targets, render, now, queue_cap)

    # twin: store/postgres_functions.sql::sw_enqueue (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_queue.py::test_a_hand_queued_copy_of_a_pending_notice_is_deduped)
    def enqueue(self, session_key: str, text: str, context_key: str | None, ts: int, queue_cap: int,
                queue_only: bool = False, notice: tuple[str, int] | None = None) -> QueueEntry | None:
        with self._tx() as conn:
            if notice is not None and sq.slot_live(conn, session_key, notice[0], queue_cap) is not None:
                target, last_seen = notice
                if not sq.append_notice(conn, session_key, target, last_seen, context_key or "", ts, queue_cap,
                                        queue_only):
                    return None
                idx = conn.execute("SELECT queued_id FROM cursors WHERE target = ? AND watcher = ?",
                                   (target, session_key)).fetchone()[0]
                return QueueEntry(idx, session_key, text, context_key, ts, queue_only, target=target)
            return sq.append_generic(conn, session_key, text, context_key, ts, queue_cap)

    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]:
        with self._read() as conn:
            return sq.entries(conn, session_key, render, queue_cap)

    def drain(self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int,
              queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        with self._tx() as conn:
            entries = sq.drain(conn, session_key, render, queue_cap)
            targets = list(dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries)
                                         if t is not None))
            wakes = self._ack(conn, session_key, targets, render, now, queue_cap) if targets else []
        return entries, wakes

    def acknowledge_entries(self, session_key: str, ids: Sequence[int], decode: Callable[[str | None], str | None],
                            render: Render, now: int, queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        with self._tx() as conn:
            entries = sq.remove_ids(conn, session_key, set(ids), render, queue_cap)
            targets = list(dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries)
                                         if t is not None))
            wakes = self._ack(conn, session_key, targets, render, now, queue_cap) if targets else []
        return entries, wakes

    # twin: store/postgres_functions.sql::sw_reconcile (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_delivery.py::test_a_truncated_page_leaves_one_notice_quoting_the_new_last_seen)
    def reconcile(self, watcher: str, target: str, after: int, last: int, render: Render, now: int,
                  queue_cap: int) -> list[WakeRequest]:
        with self._lock:  # most reads are not a watcher's: answer those without taking the write lock
            seen = self._conn.execute("SELECT last_seen FROM cursors WHERE target = ? AND watcher = ?",
                                      (target, watcher)).fetchone()
        if seen is None or after > seen[0] or last <= seen[0]:
            return []
        with self._tx() as conn:
            row = conn.execute("SELECT last_seen, material, provenance FROM cursors WHERE target = ? AND watcher = ?",
                               (target, watcher)).fetchone()
            if row is None or after > row[0] or last <= row[0]:
                return []  # not a watcher, a page that skipped events, or nothing new in it
            material, quiet = row[1], row[2] == "ambient-group"
            was_live = bool((sq.slot_live(conn, watcher, target, queue_cap) or (False, 0))[0])
            if material > last:  # notify-eligible events beyond the page: one notice, quoting the new position
                conn.execute("UPDATE cursors SET last_seen = ?1, notified = material, updated_at = ?2"
                             " WHERE target = ?3 AND watcher = ?4", (last, now, target, watcher))
                sq.append_notice(conn, watcher, target, last, render(target).context_key, now, queue_cap, quiet)
                if not was_live and not quiet and not is_subagent_key(watcher):
                    return [WakeRequest(watcher, target)]
                return []
            conn.execute("UPDATE cursors SET last_seen = ?1, notified = ?1, material = ?1, updated_at = ?2"
                         " WHERE target = ?3 AND watcher = ?4", (last, now, target, watcher))
            sq.remove_slot(conn, watcher, target, queue_cap)
        return []

    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        with self._read() as conn:
            return sq.has_pending_notice(conn, watcher, queue_cap)

    # twin: store/postgres.py::PostgresStore.sweep + store/postgres_functions.sql::sw_append_notices
    #   (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap)
    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        wakes: list[WakeRequest] = []
        with self._tx() as conn:
            rows = conn.execute(
                "UPDATE cursors SET notified = material, updated_at = ?1 WHERE material > last_seen"
                " AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = cursors.watcher)"
                " RETURNING watcher, target, last_seen, provenance", (now,)).fetchall()
            rows.sort()
            for watcher, target, last_seen, provenance in rows:
                quiet = provenance == "ambient-group"
                sq.append_notice(conn, watcher, target, last_seen, render(target).context_key, now, queue_cap, quiet)
                if not quiet and not is_subagent_key(watcher):
                    wakes.append(WakeRequest(watcher, target))
        return len(rows), wakes
