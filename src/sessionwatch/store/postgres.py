"""PostgreSQL backend: any number of gateway processes share one database.

Same tables and semantics as the SQLite store. The hot write paths are plpgsql functions
(``migrations/postgres``) called in one round trip on autocommit connections from a pool. Every
transaction that inserts an event or moves a cursor or a queue first takes the writer lock, a
transaction-level advisory lock, so sequences (and wake positions) become visible in commit order:
a reader polling ``sequence > last`` never skips a lower sequence that commits late. Readers take no
lock.

Wakes cross processes by NOTIFY, sent in the transaction that queued the notice. A dedicated LISTEN
connection per process delivers them (skipping its own origin); ``poll_wakes`` catches up on waking
notices stamped since the last poll, so a NOTIFY lost while the listener was reconnecting delays a
wake but never loses it.

URL: ``postgresql://user@host:5432/db`` plus optional ``pool_size`` (max connections, default 10)
and ``pool_min`` (default 1) query parameters; everything else goes to libpq unchanged
(``options=-csearch_path=myschema`` selects a schema).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import select
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ..errors import StoreUnavailable
from ..kinds import NOTIFY_ELIGIBLE, SEEDING
from ..keys import is_agent_qualified, is_subagent_key
from .base import Render, Store, WakeListener
from .records import (ChangesPage, Cursor, EventInput, EventRecord, Link, MessageRow, Node, PruneResult,
                      QueueEntry, RecordOutcome, SessionRow, WakeRequest, dumps, loads)
# Row shapes are shared with the SQLite backend (same columns, same order).
from .sqlite import _event, event_body
from .sqlite_links import _link
from .sqlite_sessions import _message, _session

log = logging.getLogger("sessionwatch.store.postgres")

T = TypeVar("T")
OWN_PARAMS = ("pool_size", "pool_min")
SEEN_WAKES = 10_000  # remembered deliveries per kind (NOTIFY, poll, own commits)

_EVENT_COLS = ("sequence, session_key, agent_id, kind, actor_type, occurred_at, summary, actor_id,"
               " session_id, run_id, dedupe_key, body")
_SESSION_COLS = ("session_key, agent_id, session_id, kind, spawned_by, label, active_run_id, goal_json,"
                 " created_at, updated_at")
_MESSAGE_COLS = "id, session_key, agent_id, role, text, created_at, provenance, source_session_key, channel, imported"
_LINK_COLS = ("session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json,"
              " last_marker_json, created_at, updated_at, last_scanned_at, miss_count, miss_link_updated_at")
_CURSOR_COLS = "watcher, target, last_seen, notified, material, provenance, updated_at"

_RECORD = (
    "SELECT * FROM sw_record(%s::bigint, %s, %s, %s, %s, %s, %s, %s, %s, %s::bigint, %s, %s, %s::text[], %s,"
    " %s::integer, %s, %s::bigint, %s::integer, %s, %s, %s::bigint, %s)")
# One statement, one snapshot: the page (stored bodies concatenated), its size, the head and the oldest
# retained sequence.
_CHANGES = (
    "WITH p AS (SELECT sequence, body FROM events WHERE session_key = %(k)s AND agent_id = %(a)s"
    " AND sequence > %(after)s::bigint ORDER BY sequence LIMIT %(lim)s::bigint)"
    " SELECT (SELECT '[' || string_agg('{\"sequence\":' || sequence || ',' || substr(body, 2), ','"
    " ORDER BY sequence) || ']' FROM p), (SELECT count(*) FROM p),"
    " h.last_sequence, h.pruned_max_sequence,"
    " (SELECT e.sequence FROM events e WHERE e.session_key = %(k)s AND e.agent_id = %(a)s"
    " ORDER BY e.sequence LIMIT 1)"
    " FROM (SELECT 1) one LEFT JOIN heads h ON h.session_key = %(k)s AND h.agent_id = %(a)s")
_POLL = (
    "SELECT c.watcher, c.target, c.wake_seq FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher"
    " WHERE c.watcher = ANY (%(ws)s::text[]) AND c.wake_seq > %(last)s::bigint AND c.provenance = 'explicit'"
    " AND NOT c.queued_quiet AND c.queued_idx > h.drained AND h.appended - c.queued_idx < %(cap)s::integer")


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Separate sessionwatch's own query parameters from the libpq connection string."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_PARAMS}
    if not own:
        return url, own
    rest = [(k, v) for k, v in query if k not in OWN_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote))), own


def lock_key(schema: str, name: str) -> int:
    """A stable signed 64-bit advisory-lock key, distinct per schema (stores in one database)."""
    digest = hashlib.blake2b(f"sessionwatch:{schema}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def wake_channel(schema: str) -> str:
    """The NOTIFY channel: ``sessionwatch_wake`` for the public schema, else one per schema."""
    if schema == "public":
        return "sessionwatch_wake"
    return "sessionwatch_wake_" + hashlib.blake2b(schema.encode(), digest_size=6).hexdigest()


def _migration_files() -> dict[int, Any]:
    folder = resources.files("sessionwatch.store").joinpath("migrations/postgres")
    return {int(f.name.split("_", 1)[0]): f for f in folder.iterdir() if f.name.endswith(".sql")}


def _applied(conn: psycopg.Connection[Any]) -> set[int] | None:
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:  # type: ignore[index]
        return None
    return {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}


def apply_migrations(conninfo: str) -> tuple[int, str]:
    """Apply numbered migration files not yet in ``schema_migrations``; returns (version, schema).

    Safe when several gateways start at once: the work runs under a session advisory lock and the
    applied set is re-read under it. A database already up to date takes no lock.
    """
    files = _migration_files()
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        if schema is None:
            raise StoreUnavailable("no schema on the search_path exists (create it, or fix options=-csearch_path)")
        applied = _applied(conn)
        if applied is not None and set(files) <= applied:
            return max(applied), schema
        key = lock_key(schema, "migrate")
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                         " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            applied = _applied(conn) or set()
            for version, f in sorted(files.items()):
                if version in applied:
                    continue
                with conn.transaction():
                    conn.execute(f.read_text())
                    conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, f.name))
                applied.add(version)
                log.info("applied PostgreSQL migration %s to schema %s", f.name, schema)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    unknown = applied - set(files)
    if unknown:
        log.warning("schema %s has migrations this version does not know: %s", schema, sorted(unknown))
    return max(applied), schema


class _AdvisoryLock:
    """A held session-level advisory lock on a pooled connection; released on exit."""

    def __init__(self, pool: ConnectionPool, conn: psycopg.Connection[Any], key: int) -> None:
        self._pool, self._conn, self._key = pool, conn, key

    def __enter__(self) -> _AdvisoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        except psycopg.Error:
            self._conn.close()  # a broken session has released its locks already
        self._pool.putconn(self._conn)


class PostgresStore(Store):
    """The scale-out backend. Thread-safe: a connection pool plus one LISTEN connection."""

    multi_process = True
    keepalive_s = 30.0
    backoff_initial_s = 0.2
    backoff_max_s = 5.0

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo, own = split_url(url)
        self.schema_version, self.schema = apply_migrations(self._conninfo)
        self._writer = lock_key(self.schema, "writer")
        self._prune_key = lock_key(self.schema, "prune")
        self.channel = wake_channel(self.schema)
        self.origin = uuid.uuid4().hex[:16]
        self._connect_kwargs: dict[str, Any] = {}
        if "application_name" not in conninfo_to_dict(self._conninfo):
            self._connect_kwargs["application_name"] = "sessionwatch"
        size = max(1, int(own.get("pool_size", 10)))
        self._pool = ConnectionPool(self._conninfo, min_size=min(size, max(0, int(own.get("pool_min", 1)))),
                                    max_size=size, kwargs={"autocommit": True, **self._connect_kwargs},
                                    timeout=15.0, name="sessionwatch", open=False)
        self._pool.open(wait=True, timeout=15.0)
        self._queue_cap = 20
        self._wake_lock = threading.Lock()
        # Wakes already delivered, so NOTIFY and the poll never both deliver one commit's wake.
        self._by_notify: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._by_poll: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._local_seqs: OrderedDict[int, None] = OrderedDict()
        self._own_prefix = '{"o":' + json.dumps(self.origin) + ","
        # Durable commits wanted (the session's synchronous_commit is not off): the hot writers commit
        # asynchronously under the writer lock, then _flush waits for the WAL outside it.
        self._flush_after: bool = self._run(
            lambda c: c.execute("SHOW synchronous_commit").fetchone()[0] != "off")  # type: ignore[index]
        self._wake_last: int = self._run(
            lambda c: c.execute("SELECT coalesce(max(last_wake), 0) FROM queue_heads").fetchone()[0])  # type: ignore[index]
        self._notify_max = 0  # highest wake position delivered (NOTIFY or own commit) since the last poll
        self._listen_epoch = 0  # LISTEN (re)connections so far
        self._epoch_at_poll = 0
        self._listener: WakeListener | None = None
        self._listen_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pipe_r, self._pipe_w = os.pipe()
        self.listening = threading.Event()  # set while the LISTEN connection is up (tests wait on it)
        self.listener_connects = 0
        self._poll_warned_at = 0.0
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        os.write(self._pipe_w, b"x")
        if self._listen_thread is not None:
            self._listen_thread.join(timeout=5)
        os.close(self._pipe_r)
        os.close(self._pipe_w)
        self._pool.close()

    # -- helpers ---------------------------------------------------------------------------------
    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a pooled connection. A connection that broke (the server restarted, the
        pool held a dead socket) is replaced and the work retried; so is a deadlock victim."""
        for attempt in range(3):
            used: psycopg.Connection[Any] | None = None
            try:
                with self._pool.connection() as conn:
                    used = conn
                    return work(conn)
            except psycopg.errors.DeadlockDetected:
                if attempt == 2:
                    raise
            except psycopg.OperationalError:
                if attempt == 2 or used is None or not used.broken:
                    raise
                log.warning("PostgreSQL connection lost; retrying on a fresh one")
                self._pool.check()
        raise AssertionError("unreachable")

    def _flush(self) -> None:
        """Wait until everything this process committed is on disk (a write transaction's commit flushes
        the WAL up to itself). Outside the writer lock, so concurrent gateways share one fsync; the
        writes are visible to others a moment before they are durable, as with synchronous_commit=off."""
        if not self._flush_after:
            return
        try:
            self._run(lambda c: c.execute("SELECT pg_current_xact_id()"))
        except psycopg.Error as exc:  # committed, maybe not yet flushed: nothing to undo or retry
            log.warning("waiting for the WAL flush failed: %s", exc)

    def _one(self, query: str, params: Any = None) -> Any:
        return self._run(lambda c: c.execute(query, params).fetchone())  # type: ignore[arg-type]

    def _all(self, query: str, params: Any = None) -> list[Any]:
        return self._run(lambda c: c.execute(query, params).fetchall())  # type: ignore[arg-type]

    def _remember(self, seen: OrderedDict[Any, None], key: Any) -> None:
        seen[key] = None
        while len(seen) > SEEN_WAKES:
            seen.popitem(last=False)

    def _notified(self, watcher: str, target: str, wake_seq: int) -> bool:
        """A wake arrived by NOTIFY: deliver it unless the poll already did (it always wins otherwise:
        one commit, one notification per listener)."""
        key = (watcher, target, wake_seq)
        with self._wake_lock:
            self._notify_max = max(self._notify_max, wake_seq)
            if key in self._by_poll:
                return False
            self._remember(self._by_notify, key)
            return True

    def _unseen(self, watcher: str, target: str, wake_seq: int) -> bool:
        """The poll found a waking notice: new unless NOTIFY, the poll, or this process's own commit
        delivered it already."""
        key = (watcher, target, wake_seq)
        with self._wake_lock:
            if key in self._by_notify or key in self._by_poll or wake_seq in self._local_seqs:
                return False
            self._remember(self._by_poll, key)
            return True

    def _committed_here(self, wake_seqs: Iterable[int | None]) -> None:
        """Wake positions this process committed (and delivered itself): the poll skips them."""
        with self._wake_lock:
            for s in wake_seqs:
                if s:
                    self._remember(self._local_seqs, s)
                    self._notify_max = max(self._notify_max, s)

    # -- cross-process wakes ---------------------------------------------------------------------
    def listen_wakes(self, listener: WakeListener) -> None:
        self._listener = listener
        if self._listen_thread is None and not self._closed:
            self._listen_thread = threading.Thread(target=self._listen_loop, name="sessionwatch-pg-listen",
                                                   daemon=True)
            self._listen_thread.start()

    def _listen_loop(self) -> None:
        backoff = self.backoff_initial_s
        while not self._stop.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5, keepalives=1,
                                       keepalives_idle=30, keepalives_interval=10, keepalives_count=3,
                                       **self._connect_kwargs)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                with self._wake_lock:
                    self._listen_epoch += 1
                self.listener_connects += 1
                self.listening.set()
                backoff = self.backoff_initial_s
                self._listen_until_error(conn)
            except Exception as exc:  # the database went away, or refused us: back off and retry
                if not self._stop.is_set():
                    log.warning("wake listener: %s; reconnecting in %.1f s", exc, backoff)
            finally:
                self.listening.clear()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, self.backoff_max_s)

    def _listen_until_error(self, conn: psycopg.Connection[Any]) -> None:
        last_io = time.monotonic()
        fd = conn.fileno()
        while not self._stop.is_set():
            timeout = max(0.0, self.keepalive_s - (time.monotonic() - last_io))
            ready, _, _ = select.select([fd, self._pipe_r], [], [], timeout)
            if self._pipe_r in ready:
                return
            if fd in ready:
                for note in conn.notifies(timeout=0):
                    self._on_notify(note.payload)
                last_io = time.monotonic()
            elif time.monotonic() - last_io >= self.keepalive_s:
                conn.execute("SELECT 1")  # liveness probe: a dead server surfaces as an error here
                last_io = time.monotonic()

    def _on_notify(self, payload: str) -> None:
        if payload.startswith(self._own_prefix):
            return  # this process delivered those itself
        try:
            data = json.loads(payload)
            items = [(str(w), str(t), int(s or 0)) for w, t, s in zip(data["w"], data["t"], data["s"], strict=True)]
        except (ValueError, TypeError, KeyError):
            log.warning("ignoring a malformed wake notification: %.200s", payload)
            return
        listener = self._listener
        for w, t, s in items:
            if self._notified(w, t, s) and not is_subagent_key(w) and listener is not None:
                try:
                    listener(WakeRequest(w, t))
                except Exception:
                    log.exception("wake listener callback failed")

    def poll_wakes(self, watchers: Iterable[str]) -> list[WakeRequest]:
        """Waking notices stamped after the last poll for these (subscribed) watchers.

        Wake positions are allocated under the writer lock, so they become visible in commit order and
        "wake_seq > last" misses nothing. ``last`` also moves past what NOTIFY delivered, but only when
        the listener stayed connected since the previous poll (then every commit in between was
        notified); after a gap it stays put, and this query finds what the gap swallowed.
        """
        with self._wake_lock:
            epoch, notified_up_to = self._listen_epoch, self._notify_max
            self._notify_max = 0
        continuous = self.listening.is_set() and epoch == self._epoch_at_poll
        self._epoch_at_poll = epoch
        ws = [w for w in watchers if not is_subagent_key(w)]
        rows: list[Any] = []
        if ws:
            try:
                rows = self._all(_POLL, {"last": self._wake_last, "ws": ws, "cap": self._queue_cap})
            except psycopg.Error as exc:
                now = time.monotonic()
                if now - self._poll_warned_at > 30:
                    self._poll_warned_at = now
                    log.warning("wake poll failed (will retry): %s", exc)
                self._epoch_at_poll = -1  # not caught up: do not move past anything next time
                return []
        out: list[WakeRequest] = []
        top = max(self._wake_last, notified_up_to) if continuous else self._wake_last
        for w, t, seq in rows:
            top = max(top, seq)
            if self._unseen(w, t, seq):
                out.append(WakeRequest(w, t))
        self._wake_last = top
        return out

    def try_lock(self, name: str) -> Any:
        """Hold a session-level advisory lock (say, for one monitor tick); None when another holds it."""
        key = lock_key(self.schema, "lock:" + name)
        conn = self._pool.getconn()
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]  # type: ignore[index]
        except BaseException:
            self._pool.putconn(conn)
            raise
        if not got:
            self._pool.putconn(conn)
            return None
        return _AdvisoryLock(self._pool, conn, key)

    # -- signal log ------------------------------------------------------------------------------
    def record(self, ev: EventInput, render: Render, now: int, queue_cap: int,
               want_wakes: bool) -> RecordOutcome | None:
        self._queue_cap = queue_cap
        key = ev.session_key
        mode = 1 if ev.kind in SEEDING else 2 if ev.kind in NOTIFY_ELIGIBLE else 0
        params = (self._writer, ev.dedupe_key, key, ev.session_id, ev.agent_id, ev.kind, ev.actor_type, ev.actor_id,
                  ev.run_id, ev.occurred_at, ev.summary, event_body(ev), list(ev.watchers), ev.only_if_watched,
                  mode, render(key).context_key if mode == 2 else None, now, queue_cap, self.channel, self.origin,
                  *(ev.expected_link or (None, None)))
        row = self._one(_RECORD, params)
        if row is None:
            return None
        if row[0]:
            self._flush()
        if not row[0]:
            return RecordOutcome(None if row[1] is None else _event(row[1:13]), False)
        wakes: list[WakeRequest] = []
        if row[13]:
            self._committed_here(set(row[14]))
            if want_wakes:
                wakes = [WakeRequest(w, key) for w in row[13] if not is_subagent_key(w)]
        return RecordOutcome(EventRecord(row[1], key, ev.agent_id, ev.kind, ev.actor_type, ev.occurred_at,
                                         ev.summary, ev.actor_id, ev.session_id, ev.run_id, ev.dedupe_key,
                                         ev.payload), True, wakes)

    def changes_since(self, session_key: str, agent_id: str, after: int, limit: int) -> ChangesPage:
        page, count, last, pruned, earliest = self._one(
            _CHANGES, {"k": session_key, "a": agent_id, "after": after, "lim": limit + 1})
        events = loads(page) if count else []
        if count > limit:
            events.pop()
        last, pruned = last or 0, pruned or 0
        if earliest is None:
            earliest = last + 1 if last > 0 else 0
        return ChangesPage(events, count > limit, earliest, after < pruned)

    def events_after(self, after: int, limit: int) -> list[EventRecord]:
        return [_event(r) for r in self._all(
            f"SELECT {_EVENT_COLS} FROM events WHERE sequence > %s::bigint ORDER BY sequence LIMIT %s::bigint",
            (after, limit))]

    def state_version(self, session_key: str, agent_id: str) -> int:
        row = self._one("SELECT last_sequence FROM heads WHERE session_key = %s AND agent_id = %s",
                        (session_key, agent_id))
        return row[0] if row else 0

    def state_versions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        keys = sorted({k for k, _ in pairs})
        if not keys:
            return {}
        found = {(k, a): v for k, a, v in self._all(
            "SELECT session_key, agent_id, last_sequence FROM heads WHERE session_key = ANY (%s::text[])", (keys,))}
        return {p: found[p] for p in pairs if p in found}

    def prune(self, now: int, retention_ms: int, max_rows: int, *, force: bool, interval_ms: int,
              queue_cap: int = 20) -> PruneResult:
        skipped, rows, cursors, stamped = self._one(
            "SELECT * FROM sw_prune(%s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::bigint, %s, %s::bigint,"
            " %s::integer)",
            (self._prune_key, self._writer, now, now - retention_ms, max_rows, force, interval_ms, queue_cap))
        return PruneResult(rows_deleted=rows, cursors_deleted=cursors, heads_stamped=stamped, skipped=skipped)

    # -- cursors and the queue -------------------------------------------------------------------
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        if watcher == target or not is_agent_qualified(watcher) or not is_agent_qualified(target):
            return False
        row = self._one("SELECT sw_register(%s::bigint, %s, %s, %s, %s, %s::bigint)",
                        (self._writer, watcher, target, target_agent, provenance, now))
        return bool(row[0])

    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        row = self._one("SELECT sw_unwatch(%s::bigint, %s, %s, %s, %s::bigint, %s::integer)",
                        (self._writer, watcher, target, context_key, now, queue_cap))
        return bool(row[0])

    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]:
        query = f"SELECT {_CURSOR_COLS} FROM cursors"
        where, args = [], []
        if watcher is not None:
            where.append("watcher = %s")
            args.append(watcher)
        if target is not None:
            where.append("target = %s")
            args.append(target)
        if where:
            query += " WHERE " + " AND ".join(where)
        return [Cursor(*r) for r in self._all(query + " ORDER BY watcher, target", args)]

    def _ack(self, conn: psycopg.Connection[Any], watcher: str, targets: Sequence[str], render: Render, now: int,
             queue_cap: int) -> list[WakeRequest]:
        last = {t: i for i, t in enumerate(targets)}  # reopen in consumption order (a repeat counts last)
        ordered = sorted(last, key=last.__getitem__)
        rows = conn.execute(
            "SELECT * FROM sw_ack(%s::bigint, %s, %s::text[], %s::text[], %s::bigint, %s::integer, %s, %s)",
            (self._writer, watcher, ordered, [render(t).context_key for t in ordered], now, queue_cap,
             self.channel, self.origin)).fetchall()
        self._committed_here(s for _, _, quiet, s in rows if not quiet)
        return [] if is_subagent_key(watcher) else [WakeRequest(watcher, t) for t, _, quiet, _ in rows if not quiet]

    def acknowledge(self, watcher: str, targets: Sequence[str], render: Render, now: int,
                    queue_cap: int) -> list[WakeRequest]:
        if not targets:
            return []
        self._queue_cap = queue_cap
        wakes = self._run(lambda c: self._ack(c, watcher, targets, render, now, queue_cap))
        self._flush()
        return wakes

    def enqueue(self, session_key: str, text: str, context_key: str | None, ts: int, queue_cap: int,
                queue_only: bool = False, notice: tuple[str, int] | None = None) -> QueueEntry | None:
        target, last_seen = notice if notice is not None else (None, None)
        idx, slot = self._one(
            "SELECT * FROM sw_enqueue(%s::bigint, %s, %s, %s, %s::bigint, %s::integer, %s, %s, %s::bigint)",
            (self._writer, session_key, text, context_key, ts, queue_cap, queue_only, target, last_seen))
        if idx is None:
            return None
        self._flush()
        if slot:
            return QueueEntry(idx, session_key, text, context_key, ts, queue_only, target=target)
        return QueueEntry(idx, session_key, text, context_key, ts)

    @staticmethod
    def _entries(session_key: str, rows: Iterable[Sequence[Any]], render: Render) -> list[QueueEntry]:
        out: list[QueueEntry] = []
        for idx, target, last_seen, ts, quiet, ctx, text in rows:
            if target is not None:
                t = render(target)
                out.append(QueueEntry(idx, session_key, t.text(last_seen), t.context_key, ts, quiet, target=target))
            else:
                out.append(QueueEntry(idx, session_key, text, ctx, ts))
        return out

    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]:
        return self._entries(session_key, self._all("SELECT * FROM sw_queue(%s, %s::integer)",
                                                    (session_key, queue_cap)), render)

    def drain(self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int,
              queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        self._queue_cap = queue_cap

        def work(conn: psycopg.Connection[Any]) -> tuple[list[QueueEntry], list[WakeRequest]]:
            with conn.transaction():
                entries = self._entries(session_key, conn.execute(
                    "SELECT * FROM sw_take_queue(%s::bigint, %s, %s::integer)",
                    (self._writer, session_key, queue_cap)).fetchall(), render)
                targets = list(dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries)
                                             if t is not None))
                wakes = self._ack(conn, session_key, targets, render, now, queue_cap) if targets else []
            return entries, wakes

        entries, wakes = self._run(work)
        if entries:
            self._flush()
        return entries, wakes

    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        row = self._one("SELECT EXISTS (SELECT 1 FROM sw_queue(%s, %s::integer)"
                        " WHERE (o_target IS NOT NULL AND NOT o_quiet) OR o_ctx ILIKE 'session-state:%%')",
                        (watcher, queue_cap))
        return bool(row[0])

    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        self._queue_cap = queue_cap

        def work(conn: psycopg.Connection[Any]) -> tuple[int, list[WakeRequest]]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._writer,))
                rows = sorted(conn.execute(
                    "UPDATE cursors SET notified = material, updated_at = %s WHERE material > last_seen"
                    " AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = cursors.watcher)"
                    " RETURNING watcher, target, last_seen, provenance", (now,)).fetchall())
                if not rows:
                    return 0, []
                quiet = [p == "ambient-group" for _, _, _, p in rows]
                stamped = conn.execute(
                    "SELECT * FROM sw_append_notices(%s::text[], %s::text[], %s::bigint[], %s::text[],"
                    " %s::boolean[], %s::bigint, %s::integer, %s, %s)",
                    ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                     [render(r[1]).context_key for r in rows], quiet, now, queue_cap, self.channel,
                     self.origin)).fetchall()
            self._committed_here(s for q, (_, s) in zip(quiet, stamped) if not q)
            return len(rows), [WakeRequest(r[0], r[1]) for r, q in zip(rows, quiet)
                               if not q and not is_subagent_key(r[0])]

        return self._run(work)

    # -- sessions and transcripts ----------------------------------------------------------------
    def put_session(self, row: SessionRow) -> tuple[SessionRow, bool]:
        # One upsert; xmax = 0 tells an insert from an update of an existing row.
        got = self._one(
            f"INSERT INTO sessions ({_SESSION_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON CONFLICT (session_key, agent_id) DO UPDATE SET"
            " kind = coalesce(nullif(excluded.kind, ''), sessions.kind),"
            " spawned_by = coalesce(excluded.spawned_by, sessions.spawned_by),"
            " label = coalesce(excluded.label, sessions.label), updated_at = excluded.updated_at"
            f" RETURNING {_SESSION_COLS}, xmax = 0",
            (row.session_key, row.agent_id, row.session_id, row.kind, row.spawned_by, row.label, row.active_run_id,
             None if row.goal is None else dumps(row.goal), row.created_at, row.updated_at))
        return _session(got[:10]), bool(got[10])

    def get_session(self, session_key: str, agent_id: str) -> SessionRow | None:
        row = self._one(f"SELECT {_SESSION_COLS} FROM sessions WHERE session_key = %s AND agent_id = %s",
                        (session_key, agent_id))
        return None if row is None else _session(row)

    def list_sessions(self, agent_id: str | None, kinds: Sequence[str] | None, limit: int) -> list[SessionRow]:
        query = f"SELECT {_SESSION_COLS} FROM sessions"
        where: list[str] = []
        args: list[Any] = []
        if agent_id is not None:
            where.append("agent_id = %s")
            args.append(agent_id)
        if kinds:
            where.append("kind = ANY (%s::text[])")
            args.append(list(kinds))
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY updated_at DESC, session_key LIMIT %s"
        args.append(limit)
        return [_session(r) for r in self._all(query, args)]

    _UPDATABLE = {"session_id": "session_id", "active_run_id": "active_run_id", "goal": "goal_json",
                  "spawned_by": "spawned_by"}

    def update_session(self, session_key: str, agent_id: str, now: int, **fields: Any) -> bool:
        sets, args = ["updated_at = %s"], [now]
        for name, value in fields.items():
            sets.append(f"{self._UPDATABLE[name]} = %s")
            args.append(dumps(value) if name == "goal" and value is not None else value)
        return self._run(lambda c: c.execute(
            f"UPDATE sessions SET {', '.join(sets)} WHERE session_key = %s AND agent_id = %s",
            (*args, session_key, agent_id)).rowcount > 0)

    def end_run(self, session_key: str, agent_id: str, run_id: str, now: int) -> bool:
        return self._run(lambda c: c.execute(
            "UPDATE sessions SET active_run_id = NULL, updated_at = %s WHERE session_key = %s AND agent_id = %s"
            " AND active_run_id = %s", (now, session_key, agent_id, run_id)).rowcount > 0)

    def reset_session(self, session_key: str, agent_id: str, new_session_id: str, now: int,
                      context_prefix: str, queue_cap: int = 20) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._writer,))
                found = conn.execute("UPDATE sessions SET session_id = %s, active_run_id = NULL, updated_at = %s"
                                     " WHERE session_key = %s AND agent_id = %s",
                                     (new_session_id, now, session_key, agent_id)).rowcount > 0
                if found:
                    conn.execute("DELETE FROM cursors WHERE watcher = %s", (session_key,))
                    # ILIKE: SQLite's LIKE ignores ASCII case
                    conn.execute("DELETE FROM system_events WHERE session_key = %s AND context_key ILIKE %s",
                                 (session_key, context_prefix + "%"))
                    conn.execute("SELECT sw_compact(%s, %s::integer)", (session_key, queue_cap))
            return found

        return self._run(work)

    def delete_session(self, session_key: str, agent_id: str, context_key: str, queue_cap: int = 20) -> bool:
        row = self._one("SELECT sw_delete_session(%s::bigint, %s, %s, %s, %s::integer)",
                        (self._writer, session_key, agent_id, context_key, queue_cap))
        return bool(row[0])

    def append_message(self, msg: MessageRow) -> MessageRow:
        row = self._one(
            "INSERT INTO messages (session_key, agent_id, role, text, provenance, source_session_key, channel,"
            " imported, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
            (msg.session_key, msg.agent_id, msg.role, msg.text, msg.provenance, msg.source_session_key,
             msg.channel, bool(msg.imported), msg.created_at))
        msg.id = row[0]
        return msg

    def messages(self, session_key: str, agent_id: str, limit: int, after_id: int = 0,
                 role: str | None = None) -> list[MessageRow]:
        query = (f"SELECT {_MESSAGE_COLS} FROM messages WHERE session_key = %s AND agent_id = %s AND id > %s"
                 + (" AND role = %s" if role else "") + " ORDER BY id DESC LIMIT %s")
        args: list[Any] = [session_key, agent_id, after_id] + ([role] if role else []) + [limit]
        return [_message(r) for r in reversed(self._all(query, args))]

    def own_user_texts(self, session_key: str, agent_id: str, limit: int) -> list[str]:
        return [r[0] for r in self._all(
            "SELECT text FROM messages WHERE session_key = %s AND agent_id = %s AND role = 'user'"
            " AND NOT imported ORDER BY id DESC LIMIT %s", (session_key, agent_id, limit))]

    # -- upstream links and nodes ----------------------------------------------------------------
    def upsert_link(self, link: Link, now: int) -> tuple[Link, str]:
        def work(conn: psycopg.Connection[Any]) -> tuple[Link, str]:
            with conn.transaction():
                row = conn.execute(f"SELECT {_LINK_COLS} FROM upstream_links WHERE session_key = %s"
                                   " AND agent_id = %s FOR UPDATE", (link.session_key, link.agent_id)).fetchone()
                if row is None:
                    inserted = conn.execute(
                        f"INSERT INTO upstream_links ({_LINK_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                        " ON CONFLICT DO NOTHING",
                        (link.session_key, link.agent_id, link.catalog_id, link.host_id, link.thread_id,
                         link.upstream_kind, dumps(link.upstream_ref), dumps(link.marker), now, now, None, 0,
                         None)).rowcount
                    if inserted:
                        link.created_at = link.updated_at = now
                        link.last_scanned_at, link.miss_count, link.miss_link_updated_at = None, 0, None
                        return link, "created"
                    # another gateway created it a moment ago: lock and treat it as existing
                    row = conn.execute(f"SELECT {_LINK_COLS} FROM upstream_links WHERE session_key = %s"
                                       " AND agent_id = %s FOR UPDATE",
                                       (link.session_key, link.agent_id)).fetchone()
                old = _link(row)
                updated_at = max(now, old.updated_at + 1)  # strictly increasing: it is the CAS token
                same = (old.catalog_id, old.thread_id, old.host_id, old.upstream_kind, dumps(old.upstream_ref)) == (
                    link.catalog_id, link.thread_id, link.host_id, link.upstream_kind, dumps(link.upstream_ref))
                if same:
                    conn.execute("UPDATE upstream_links SET updated_at = %s, miss_count = 0,"
                                 " miss_link_updated_at = NULL WHERE session_key = %s AND agent_id = %s",
                                 (updated_at, link.session_key, link.agent_id))
                    old.updated_at, old.miss_count, old.miss_link_updated_at = updated_at, 0, None
                    return old, "same"
                conn.execute(
                    "UPDATE upstream_links SET catalog_id = %s, host_id = %s, thread_id = %s, upstream_kind = %s,"
                    " upstream_ref_json = %s, last_marker_json = %s, last_scanned_at = NULL, miss_count = 0,"
                    " miss_link_updated_at = NULL, updated_at = %s WHERE session_key = %s AND agent_id = %s",
                    (link.catalog_id, link.host_id, link.thread_id, link.upstream_kind, dumps(link.upstream_ref),
                     dumps(link.marker), updated_at, link.session_key, link.agent_id))
                link.created_at, link.updated_at, link.last_scanned_at = old.created_at, updated_at, None
                link.miss_count, link.miss_link_updated_at = 0, None
                return link, "rebased"

        return self._run(work)

    def get_link(self, session_key: str, agent_id: str) -> Link | None:
        row = self._one(f"SELECT {_LINK_COLS} FROM upstream_links WHERE session_key = %s AND agent_id = %s",
                        (session_key, agent_id))
        return None if row is None else _link(row)

    def links(self, catalog_id: str | None = None) -> list[Link]:
        query = f"SELECT {_LINK_COLS} FROM upstream_links"
        args: tuple[Any, ...] = ()
        if catalog_id is not None:
            query += " WHERE catalog_id = %s"
            args = (catalog_id,)
        return [_link(r) for r in self._all(query + " ORDER BY session_key, agent_id", args)]

    def watched_links(self) -> list[Link]:
        return [_link(r) for r in self._all(
            f"SELECT {_LINK_COLS} FROM upstream_links l WHERE EXISTS"
            " (SELECT 1 FROM cursors c WHERE c.target = l.session_key) ORDER BY session_key, agent_id")]

    def advance_link(self, session_key: str, agent_id: str, expected_updated_at: int, marker: dict[str, Any],
                     now: int) -> bool:
        return self._run(lambda c: c.execute(
            "UPDATE upstream_links SET last_marker_json = %s, last_scanned_at = %s,"
            " updated_at = greatest(%s, updated_at + 1), miss_count = 0, miss_link_updated_at = NULL"
            " WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (dumps(marker), now, now, session_key, agent_id, expected_updated_at)).rowcount > 0)

    def set_link_misses(self, session_key: str, agent_id: str, expected_updated_at: int, count: int) -> bool:
        return self._run(lambda c: c.execute(
            "UPDATE upstream_links SET miss_count = %s, miss_link_updated_at = %s"
            " WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (count, expected_updated_at if count else None, session_key, agent_id,
             expected_updated_at)).rowcount > 0)

    def delete_link(self, session_key: str, agent_id: str, expected_updated_at: int | None = None) -> bool:
        if expected_updated_at is None:
            return self._run(lambda c: c.execute(
                "DELETE FROM upstream_links WHERE session_key = %s AND agent_id = %s",
                (session_key, agent_id)).rowcount > 0)
        return self._run(lambda c: c.execute(
            "DELETE FROM upstream_links WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (session_key, agent_id, expected_updated_at)).rowcount > 0)

    def put_node(self, node: Node) -> Node:
        row = self._one("INSERT INTO nodes (node_id, url, token, created_at, updated_at) VALUES (%s,%s,%s,%s,%s)"
                        " ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, token = excluded.token,"
                        " updated_at = excluded.updated_at RETURNING node_id, url, token, created_at, updated_at",
                        (node.node_id, node.url, node.token, node.created_at, node.updated_at))
        return Node(*row)

    def get_node(self, node_id: str) -> Node | None:
        row = self._one("SELECT node_id, url, token, created_at, updated_at FROM nodes WHERE node_id = %s",
                        (node_id,))
        return None if row is None else Node(*row)

    def nodes(self) -> list[Node]:
        return [Node(*r) for r in self._all("SELECT node_id, url, token, created_at, updated_at FROM nodes"
                                            " ORDER BY node_id")]
