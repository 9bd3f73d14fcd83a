"""PostgreSQL backend: any number of gateway processes share one database.

Same tables and semantics as the SQLite store. The hot write paths are plpgsql functions
(``postgres_functions.sql``) called in one round trip on autocommit connections from a pool. Every
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
import re
import select
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ..errors import StoreUnavailable
from ..keys import is_agent_qualified, is_subagent_key
from ..kinds import NOTIFY_ELIGIBLE, SEEDING
from .base import Render, Store, WakeListener
from .data_settings import PostgresDataSettings
from .postgres_links import LinksMixin
from .postgres_sessions import SessionsMixin
from .postgres_tokens import TokensMixin
from .records import (
    ChangesPage,
    Cursor,
    EventInput,
    EventRecord,
    LogBounds,
    PruneResult,
    QueueEntry,
    RecordOutcome,
    WakeRequest,
    loads,
)
from .rows import EVENT_COLS, cursor_query, event_body, event_from_row

log = logging.getLogger("sessionwatch.store.postgres")

T = TypeVar("T")
OWN_PARAMS = ("pool_size", "pool_min")
PRUNE_BATCH = 1_000  # events deleted per prune transaction (sqlite.PRUNE_BATCH)
CURSOR_SLICE = 5_000  # cursor rows the stale-cursor cleanup examines per prune
SEEN_WAKES = 10_000  # remembered deliveries per kind (NOTIFY, poll, own commits)


def named_call(function: str, *params: str) -> str:
    """``SELECT * FROM function(p_a => %(a)s, ...)``: a call in named notation, each argument bound by
    name from a dict, so neither side depends on the parameter order; results are read by column name
    (dict_row). ``"a::bigint"`` adds a cast where the Python value alone does not say the type (an int
    or None is not a bigint, an empty list not a text[]). The parameters are those of
    postgres_functions.sql, without their ``p_`` prefix."""
    args = []
    for param in params:
        name, _, cast = param.partition("::")
        args.append(f"p_{name} => %({name})s" + (f"::{cast}" if cast else ""))
    return f"SELECT * FROM {function}({', '.join(args)})"


_RECORD = named_call(
    "sw_record", "lock::bigint", "dedupe", "key", "session_id", "agent", "kind", "actor_type", "actor_id", "run_id",
    "occurred_at::bigint", "summary", "body", "watchers::text[]", "only_if_watched", "mode::integer", "ctx",
    "now::bigint", "cap::integer", "channel", "origin", "link_updated_at::bigint", "link_ref")
_PRUNE = named_call(
    "sw_prune", "prune_lock::bigint", "lock::bigint", "now::bigint", "cutoff::bigint", "max_rows::bigint", "force",
    "interval::bigint", "cap::integer")
_PRUNE_STEP = named_call(
    "sw_prune_step", "prune_lock::bigint", "lock::bigint", "cutoff::bigint", "max_rows::bigint", "batch::integer",
    "slice::integer", "cap::integer")
_REGISTER = named_call("sw_register", "lock::bigint", "watcher", "target", "agent", "provenance", "now::bigint")
_UNWATCH = named_call("sw_unwatch", "lock::bigint", "watcher", "target", "ctx", "now::bigint", "cap::integer")
_ACK = named_call(
    "sw_ack", "lock::bigint", "watcher", "targets::text[]", "ctxs::text[]", "now::bigint", "cap::integer", "channel",
    "origin")
_ENQUEUE = named_call(
    "sw_enqueue", "lock::bigint", "session", "text", "ctx", "ts::bigint", "cap::integer", "quiet", "target",
    "ls::bigint")
_QUEUE = named_call("sw_queue", "session", "cap::integer")
_TAKE_QUEUE = named_call("sw_take_queue", "lock::bigint", "session", "cap::integer")
_TAKE_ENTRIES = named_call("sw_take_entries", "lock::bigint", "session", "ids::bigint[]", "cap::integer")
_RECONCILE = named_call(
    "sw_reconcile", "lock::bigint", "watcher", "target", "after::bigint", "last::bigint", "ctx", "now::bigint",
    "cap::integer", "channel", "origin")
_APPEND_NOTICES = named_call(
    "sw_append_notices", "watchers::text[]", "targets::text[]", "ls::bigint[]", "ctxs::text[]", "quiet::boolean[]",
    "ts::bigint", "cap::integer", "channel", "origin")
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


def _recorded_event(row: Mapping[str, Any]) -> EventRecord:
    """The event sw_record returned (o_* columns), as a record."""
    return EventRecord(sequence=row["o_sequence"], session_key=row["o_session_key"], agent_id=row["o_agent_id"],
                       kind=row["o_kind"], actor_type=row["o_actor_type"], occurred_at=row["o_occurred_at"],
                       summary=row["o_summary"], actor_id=row["o_actor_id"], session_id=row["o_session_id"],
                       run_id=row["o_run_id"], dedupe_key=row["o_dedupe_key"],
                       payload=loads(row["o_body"]).get("payload"))


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


def _migration_files() -> dict[int, Traversable]:
    folder = resources.files("sessionwatch.store").joinpath("migrations/postgres")
    return {int(f.name.split("_", 1)[0]): f for f in folder.iterdir() if f.name.endswith(".sql")}


@lru_cache(maxsize=1)
def functions_sql() -> tuple[str, int, str]:
    """The function definitions (postgres_functions.sql): text, revision, SHA-256 of the text."""
    text = resources.files("sessionwatch.store").joinpath("postgres_functions.sql").read_text()
    found = re.search(r"^-- revision: (\d+)$", text, re.MULTILINE)
    if found is None:
        raise AssertionError("postgres_functions.sql has no '-- revision: N' line")
    return text, int(found.group(1)), hashlib.sha256(text.encode()).hexdigest()


def _applied(conn: psycopg.Connection[Any]) -> set[int] | None:
    row = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
    if row is None or row[0] is None:
        return None
    return {int(v) for (v,) in conn.execute("SELECT version FROM schema_migrations")}


def _functions_stamp(conn: psycopg.Connection[Any]) -> tuple[int, str | None]:
    """(revision, sha256) of the functions the database holds; (0, None) before any were stamped. Call
    once migration 0001 (which creates meta) is applied."""
    stamp = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('functions_revision', 'functions_sha256')"))
    return int(stamp.get("functions_revision", 0)), stamp.get("functions_sha256")


def apply_migrations(conninfo: str) -> tuple[int, str]:
    """Apply numbered migration files not yet in ``schema_migrations``, then the functions
    (postgres_functions.sql) when the database's copy differs; returns (version, schema).

    Safe when several gateways start at once: the work runs under a session advisory lock and the
    applied set is re-read under it. A database already up to date takes no lock. The functions are
    left alone when the database holds a higher revision of them, or migrations this version does not
    know: a newer gateway put them there.
    """
    files = _migration_files()
    text, revision, digest = functions_sql()
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        schema: str | None = None if row is None else row[0]
        if schema is None:
            raise StoreUnavailable("no schema on the search_path exists (create it, or fix options=-csearch_path)")
        applied = _applied(conn)
        if applied is not None and set(files) <= applied and _functions_stamp(conn)[1] == digest:
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
            _apply_functions(conn, schema, text, revision, digest, newer_schema=bool(applied - set(files)))
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    unknown = applied - set(files)
    if unknown:
        log.warning("schema %s has migrations this version does not know: %s", schema, sorted(unknown))
    return max(applied), schema


def _apply_functions(conn: psycopg.Connection[Any], schema: str, text: str, revision: int, digest: str,
                     newer_schema: bool) -> None:
    """(Re)define every function, in one transaction with its stamp; caller holds the migration lock."""
    held, held_digest = _functions_stamp(conn)
    if held_digest == digest:
        return
    if newer_schema or held > revision:
        log.warning("schema %s holds functions of a newer sessionwatch (revision %s; this version has %s):"
                    " left as they are", schema, held, revision)
        return
    with conn.transaction():
        conn.execute(text)  # our own file, not user input
        conn.execute("INSERT INTO meta (key, value) VALUES ('functions_revision', %s), ('functions_sha256', %s)"
                     " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(revision), digest))
    log.info("applied PostgreSQL functions revision %s to schema %s", revision, schema)


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


class PostgresStore(SessionsMixin, LinksMixin, TokensMixin, PostgresDataSettings, Store):
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
        return self._run(lambda c: c.execute(query, params).fetchone())

    def _all(self, query: str, params: Any = None) -> list[Any]:
        return self._run(lambda c: c.execute(query, params).fetchall())

    def _call_one(self, query: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first row of a function call (see ``named_call``), by column name."""
        return self._run(lambda c: c.cursor(row_factory=dict_row).execute(query, params).fetchone())

    def _call_all(self, query: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._run(lambda c: c.cursor(row_factory=dict_row).execute(query, params).fetchall())

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
            except Exception as exc:  # noqa: BLE001 - the database went away, or refused us: back off and retry
                if not self._stop.is_set():
                    log.warning("wake listener: %s; reconnecting in %.1f s", exc, backoff)
            finally:
                self.listening.clear()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - closing a broken connection: nothing left to do
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
        link_updated_at, link_ref = ev.expected_link or (None, None)
        row = self._call_one(_RECORD, {
            "lock": self._writer, "dedupe": ev.dedupe_key, "key": key, "session_id": ev.session_id,
            "agent": ev.agent_id, "kind": ev.kind, "actor_type": ev.actor_type, "actor_id": ev.actor_id,
            "run_id": ev.run_id, "occurred_at": ev.occurred_at, "summary": ev.summary, "body": event_body(ev),
            "watchers": list(ev.watchers), "only_if_watched": ev.only_if_watched, "mode": mode,
            "ctx": render(key).context_key if mode == 2 else None, "now": now, "cap": queue_cap,
            "channel": self.channel, "origin": self.origin, "link_updated_at": link_updated_at,
            "link_ref": link_ref})
        if row is None:
            return None
        if not row["o_inserted"]:  # a duplicate dedupe key: the event recorded first
            return RecordOutcome(None if row["o_sequence"] is None else _recorded_event(row), False)
        self._flush()
        wakes: list[WakeRequest] = []
        if row["o_wakes"]:
            self._committed_here(set(row["o_wake_seqs"]))
            if want_wakes:
                wakes = [WakeRequest(w, key) for w in row["o_wakes"] if not is_subagent_key(w)]
        return RecordOutcome(EventRecord(row["o_sequence"], key, ev.agent_id, ev.kind, ev.actor_type,
                                         ev.occurred_at, ev.summary, ev.actor_id, ev.session_id, ev.run_id,
                                         ev.dedupe_key, ev.payload), True, wakes)

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

    def events_after(self, after: int, limit: int, agents: Sequence[str] | None = None) -> list[EventRecord]:
        if agents is not None:
            return [event_from_row(r) for r in self._all(
                f"SELECT {EVENT_COLS} FROM events WHERE sequence > %s::bigint AND agent_id = ANY (%s::text[])"
                " ORDER BY sequence LIMIT %s::bigint", (after, list(agents), limit))]
        return [event_from_row(r) for r in self._all(
            f"SELECT {EVENT_COLS} FROM events WHERE sequence > %s::bigint ORDER BY sequence LIMIT %s::bigint",
            (after, limit))]

    def log_bounds(self, agents: Sequence[str] | None = None,
                   session: tuple[str, str] | None = None) -> LogBounds:
        args: list[Any]
        if session is not None:
            where, args = "session_key = %s AND agent_id = %s", list(session)
        elif agents is not None:
            where, args = "agent_id = ANY (%s::text[])", [list(agents)]
        else:
            where, args = "TRUE", []
        last, pruned, first, top, pruned_at = self._one(
            f"SELECT coalesce(max(last_sequence), 0), coalesce(max(pruned_max_sequence), 0),"
            f" (SELECT min(sequence) FROM events WHERE {where}), (SELECT max(sequence) FROM events WHERE {where}),"
            " (SELECT value FROM meta WHERE key = 'last_prune_at')"
            f" FROM heads WHERE {where}", args * 3)
        last = max(int(last), int(top or 0))
        return LogBounds(int(first) if first is not None else (last + 1 if last else 0), last, int(pruned),
                         int(pruned_at) if pruned_at is not None else None)

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
              queue_cap: int = 20,
              expire_cursors: bool = True) -> PruneResult:
        """The claim (sw_prune), then bounded steps (sw_prune_step), each its own short transaction so
        recordings never wait long for the writer lock: events in batches of PRUNE_BATCH, then one slice
        of the stale-cursor cleanup."""
        claim = self._call_one(_PRUNE, {
            "prune_lock": self._prune_key, "lock": self._writer, "now": now, "cutoff": now - retention_ms,
            "max_rows": max_rows, "force": force, "interval": interval_ms, "cap": queue_cap})
        assert claim is not None  # OUT parameters: always one row
        result = PruneResult(rows_deleted=claim["o_rows_deleted"], cursors_deleted=claim["o_cursors_deleted"],
                             heads_stamped=claim["o_heads_stamped"], skipped=claim["o_skipped"])
        if result.skipped:
            return result
        for slice_rows in (0, CURSOR_SLICE) if expire_cursors else (0,):
            more = True
            while more:
                step = self._call_one(_PRUNE_STEP, {
                    "prune_lock": self._prune_key, "lock": self._writer, "cutoff": now - retention_ms,
                    "max_rows": max_rows, "batch": PRUNE_BATCH, "slice": slice_rows, "cap": queue_cap})
                assert step is not None
                result.rows_deleted += step["o_rows_deleted"]
                result.cursors_deleted += step["o_cursors_deleted"]
                result.heads_stamped += step["o_heads_stamped"]
                more = bool(step["o_more"])
        return result

    # -- cursors and the queue -------------------------------------------------------------------
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        if watcher == target or not is_agent_qualified(watcher) or not is_agent_qualified(target):
            return False
        row = self._call_one(_REGISTER, {"lock": self._writer, "watcher": watcher, "target": target,
                                         "agent": target_agent, "provenance": provenance, "now": now})
        return row is not None and bool(row["sw_register"])

    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        row = self._call_one(_UNWATCH, {"lock": self._writer, "watcher": watcher, "target": target,
                                        "ctx": context_key, "now": now, "cap": queue_cap})
        return row is not None and bool(row["sw_unwatch"])

    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]:
        query, args = cursor_query(watcher, target, "%s")
        return [Cursor(*r) for r in self._all(query, args)]

    def _ack(self, conn: psycopg.Connection[Any] | psycopg.ClientCursor[dict[str, Any]], watcher: str,
             targets: Sequence[str], render: Render, now: int, queue_cap: int, then: str = "") -> list[WakeRequest]:
        """sw_ack on ``conn`` (a connection, or the dict-row ClientCursor of an open transaction with
        ``then`` = "; COMMIT": the ack and the commit in one round trip)."""
        cur = conn.cursor(row_factory=dict_row) if isinstance(conn, psycopg.Connection) else conn
        last = {t: i for i, t in enumerate(targets)}  # reopen in consumption order (a repeat counts last)
        ordered = sorted(last, key=last.__getitem__)
        reopened = cur.execute(_ACK + then, {
            "lock": self._writer, "watcher": watcher, "targets": ordered,
            "ctxs": [render(t).context_key for t in ordered], "now": now, "cap": queue_cap,
            "channel": self.channel, "origin": self.origin}).fetchall()
        waking = [r for r in reopened if not r["o_quiet"]]
        self._committed_here(r["o_wake_seq"] for r in waking)
        return [] if is_subagent_key(watcher) else [WakeRequest(watcher, r["o_target"]) for r in waking]

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
        row = self._call_one(_ENQUEUE, {"lock": self._writer, "session": session_key, "text": text,
                                        "ctx": context_key, "ts": ts, "cap": queue_cap, "quiet": queue_only,
                                        "target": target, "ls": last_seen})
        idx = None if row is None else row["o_idx"]
        if row is None or idx is None:
            return None
        self._flush()
        if row["o_slot"]:
            return QueueEntry(idx, session_key, text, context_key, ts, queue_only, target=target)
        return QueueEntry(idx, session_key, text, context_key, ts)

    @staticmethod
    def _entries(session_key: str, rows: Iterable[dict[str, Any]], render: Render) -> list[QueueEntry]:
        """QueueEntry per row of sw_queue (or sw_take_queue, sw_take_entries: the same columns)."""
        out: list[QueueEntry] = []
        for r in rows:
            if r["o_target"] is not None:  # a notice slot: its text is rendered from the target and last_seen
                t = render(r["o_target"])
                out.append(QueueEntry(r["o_idx"], session_key, t.text(r["o_ls"]), t.context_key, r["o_ts"],
                                      r["o_quiet"], target=r["o_target"]))
            else:
                out.append(QueueEntry(r["o_idx"], session_key, r["o_text"], r["o_ctx"], r["o_ts"]))
        return out

    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]:
        return self._entries(session_key, self._call_all(_QUEUE, {"session": session_key, "cap": queue_cap}),
                             render)

    def drain(self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int,
              queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        self._queue_cap = queue_cap
        entries, wakes = self._run(lambda c: self._take_and_ack(
            c, _TAKE_QUEUE, {"lock": self._writer, "session": session_key, "cap": queue_cap},
            session_key, decode, render, now, queue_cap))
        if entries:
            self._flush()
        return entries, wakes

    def _take_and_ack(self, conn: psycopg.Connection[Any], take: str, args: dict[str, Any], session_key: str,
                      decode: Callable[[str | None], str | None], render: Render, now: int,
                      queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        """Take entries off a queue and acknowledge their notices in one transaction, in two round trips:
        "BEGIN; take", then "ack; COMMIT" (the ack needs the taken entries, decoded here). Statements
        sent together go by the simple protocol, so psycopg binds the arguments client-side."""
        cur = psycopg.ClientCursor(conn, row_factory=dict_row)
        try:
            cur.execute("BEGIN; " + take, args)
            cur.nextset()
            entries = self._entries(session_key, cur.fetchall(), render)
            targets = list(dict.fromkeys(t for t in (e.target or decode(e.context_key) for e in entries)
                                         if t is not None))
            if targets:
                wakes = self._ack(cur, session_key, targets, render, now, queue_cap, then="; COMMIT")
            else:
                cur.execute("COMMIT")
                wakes = []
        except BaseException:
            self._rollback(conn)
            raise
        return entries, wakes

    @staticmethod
    def _rollback(conn: psycopg.Connection[Any]) -> None:
        """End a transaction a failed multi-statement call left open (a broken connection has no
        transaction left to end)."""
        if conn.pgconn.transaction_status in (psycopg.pq.TransactionStatus.INTRANS,
                                              psycopg.pq.TransactionStatus.INERROR):
            try:
                conn.rollback()
            except psycopg.Error:
                pass

    def acknowledge_entries(self, session_key: str, ids: Sequence[int], decode: Callable[[str | None], str | None],
                            render: Render, now: int, queue_cap: int) -> tuple[list[QueueEntry], list[WakeRequest]]:
        self._queue_cap = queue_cap
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return [], []
        entries, wakes = self._run(lambda c: self._take_and_ack(
            c, _TAKE_ENTRIES, {"lock": self._writer, "session": session_key, "ids": wanted, "cap": queue_cap},
            session_key, decode, render, now, queue_cap))
        if entries:
            self._flush()
        return entries, wakes

    def reconcile(self, watcher: str, target: str, after: int, last: int, render: Render, now: int,
                  queue_cap: int) -> list[WakeRequest]:
        self._queue_cap = queue_cap
        row = self._call_one(_RECONCILE, {
            "lock": self._writer, "watcher": watcher, "target": target, "after": after, "last": last,
            "ctx": render(target).context_key, "now": now, "cap": queue_cap, "channel": self.channel,
            "origin": self.origin})
        assert row is not None  # OUT parameters: always one row
        if row["o_changed"]:
            self._flush()
        if not row["o_wake"]:
            return []
        self._committed_here([row["o_wake_seq"]])
        return [] if is_subagent_key(watcher) else [WakeRequest(watcher, target)]

    # twin: store/sqlite_queue.py::has_pending_notice (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_wakes.py::test_a_promoted_ambient_notice_counts_as_pending_for_the_trailing_wake)
    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        row = self._call_one(f"SELECT EXISTS ({_QUEUE} WHERE (o_target IS NOT NULL AND NOT o_quiet)"
                             " OR o_ctx ILIKE 'session-state:%%') AS pending", {"session": watcher, "cap": queue_cap})
        return row is not None and bool(row["pending"])

    # twin: store/sqlite.py::SQLiteStore.sweep (bound by tests/conformance/test_stateful.py and
    #   tests/conformance/test_sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap)
    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        self._queue_cap = queue_cap

        def work(conn: psycopg.Connection[Any]) -> tuple[int, list[WakeRequest]]:
            # Two round trips: "BEGIN; lock; update", then "append the notices; COMMIT" (the notices are
            # rendered here). Statements sent together go by the simple protocol (ClientCursor).
            cur = psycopg.ClientCursor(conn)
            try:
                cur.execute("BEGIN; SELECT pg_advisory_xact_lock(%s);"
                            " UPDATE cursors SET notified = material, updated_at = %s WHERE material > last_seen"
                            " AND EXISTS (SELECT 1 FROM sessions s WHERE s.session_key = cursors.watcher)"
                            " RETURNING watcher, target, last_seen, provenance", (self._writer, now))
                cur.nextset()
                cur.nextset()
                rows: list[tuple[str, str, int, str]] = sorted(cur.fetchall())
                if not rows:
                    cur.execute("COMMIT")
                    return 0, []
                quiet = [p == "ambient-group" for _, _, _, p in rows]
                stamped = psycopg.ClientCursor(conn, row_factory=dict_row).execute(_APPEND_NOTICES + "; COMMIT", {
                    "watchers": [w for w, _, _, _ in rows], "targets": [t for _, t, _, _ in rows],
                    "ls": [ls for _, _, ls, _ in rows], "ctxs": [render(t).context_key for _, t, _, _ in rows],
                    "quiet": quiet, "ts": now, "cap": queue_cap, "channel": self.channel,
                    "origin": self.origin}).fetchall()
            except BaseException:
                self._rollback(conn)
                raise
            self._committed_here(r["o_wake_seq"] for q, r in zip(quiet, stamped, strict=True) if not q)
            return len(rows), [WakeRequest(w, t) for (w, t, _, _), q in zip(rows, quiet, strict=True)
                               if not q and not is_subagent_key(w)]

        return self._run(work)
