"""PostgreSQL connection handling: the URL, the pool, migrations and the functions file, the writer
lock, and the bookkeeping of wakes delivered (shared by the roles that commit wakes and wakes.py)."""

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
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Literal, TypeVar, overload
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from ...errors import StoreInDoubt, StoreUnavailable, StoreUnreachable
from ..base import WakeListener

log = logging.getLogger("sessionwatch.store.postgres")


T = TypeVar("T")
Row = dict[str, Any]
TUPLES_OK = ExecStatus.TUPLES_OK


OWN_PARAMS = ("pool_size", "pool_min")


SEEN_WAKES = 10_000  # remembered deliveries per kind (NOTIFY, poll, own commits)

PROVE_WITHIN_S = 10.0  # how long a write whose connection broke waits for the server to tell its fate


# A column that makes the read it is part of return only durable rows. Writers commit asynchronously (see
# PostgresConnection._durable), so a row can be visible a moment before its commit is on disk, and a crash
# then takes back what a client already read: an event, a stateVersion, a queue entry's id, which the
# server may hand out again after recovery. When the WAL is not flushed up to where it has been inserted,
# this column makes the read's own transaction one that commits synchronously (see FLUSH), so the server
# answers only once the WAL is flushed past every commit the read saw. A caught-up server pays nothing.
DURABLE_READ = (
    "CASE WHEN pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn()"
    " THEN pg_current_xact_id()::text || pg_logical_emit_message(false, 'sessionwatch', '')::text END"
)

# Wait until everything committed before is durable. PostgreSQL flushes the WAL at a commit only for a
# transaction that has a transaction id *and* wrote WAL itself (otherwise it commits asynchronously,
# whatever synchronous_commit says): a bare ``SELECT pg_current_xact_id()`` waits for nothing. The logical
# message in DURABLE_READ is the smallest WAL record a plain role may write (no table, no bloat); the
# statement's synchronous commit then flushes the WAL up to its own record, past every commit before it.
# Only when something written is not flushed yet (else it costs no fsync): the DURABLE_READ column alone.
FLUSH = f"SELECT {DURABLE_READ}"


def _roll_back(conn: psycopg.Connection[Any] | None) -> None:
    """End the explicit transaction a failed pipeline left open, so the pool gets an idle connection."""
    if conn is None or conn.closed or conn.broken:
        return
    if conn.info.transaction_status != TransactionStatus.IDLE:
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()


def _in_doubt(what: str, exc: BaseException) -> StoreInDoubt:
    return StoreInDoubt(
        f"the connection to PostgreSQL broke during {what}, so it is not known whether it was applied;"
        f" retry it (with the same dedupeKey where it has one): {exc.__class__.__name__}: {exc}"
    )


def _dead_if_readable(conn: psycopg.Connection[Any]) -> None:
    """The pool's check when it hands a connection out: an idle connection the server has something to
    say on has been closed by it (a restart, an administrator's kill). Discard it before a write goes out
    on it, instead of finding out mid-statement, where the write's fate is unknown. A poll, no round trip."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        conn.close()  # closed, the pool replaces it (a connection that only failed the check it would keep)
        raise psycopg.OperationalError("the server closed this idle connection")


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


def _migrated(conn: psycopg.Connection[Any]) -> bool:
    """Whether the schema on the connection's search_path holds a store (its migrations table)."""
    row = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
    return row is not None and row[0] is not None


def holds_store(conninfo: str, connect_timeout: int) -> bool:
    """Whether the database holds a sessionwatch store, asked without creating anything (opening the store
    would migrate an empty database). ``StoreUnreachable`` when the server does not answer."""
    try:
        with psycopg.connect(conninfo, connect_timeout=connect_timeout, autocommit=True) as conn:
            return _migrated(conn)
    except psycopg.OperationalError as exc:
        raise StoreUnreachable(f"{exc.__class__.__name__}: {' '.join(str(exc).split())}") from exc


def _applied(conn: psycopg.Connection[Any]) -> set[int] | None:
    if not _migrated(conn):
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
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
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


def _apply_functions(
    conn: psycopg.Connection[Any], schema: str, text: str, revision: int, digest: str, newer_schema: bool
) -> None:
    """(Re)define every function, in one transaction with its stamp; caller holds the migration lock."""
    held, held_digest = _functions_stamp(conn)
    if held_digest == digest:
        return
    if newer_schema or held > revision:
        log.warning(
            "schema %s holds functions of a newer sessionwatch (revision %s; this version has %s): left as they are",
            schema,
            held,
            revision,
        )
        return
    with conn.transaction():
        conn.execute(text)  # our own file, not user input
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('functions_revision', %s), ('functions_sha256', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(revision), digest),
        )
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


class PostgresConnection:
    """A pool of autocommit connections to one schema: the base of every PostgreSQL role. Each role class
    (``PostgresLog``, ``PostgresQueue``, ...) is this plus the role's methods; ``PostgresStore`` (store.py)
    is all of them on one pool."""

    url: str

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
        self._pool = ConnectionPool(
            self._conninfo,
            min_size=min(size, max(0, int(own.get("pool_min", 1)))),
            max_size=size,
            kwargs={"autocommit": True, **self._connect_kwargs},
            check=_dead_if_readable,
            timeout=15.0,
            name="sessionwatch",
            open=False,
        )
        self._pool.open(wait=True, timeout=15.0)
        self._queue_cap = 20
        self._wake_lock = threading.Lock()
        # Wakes already delivered, so NOTIFY and the poll never both deliver one commit's wake.
        self._by_notify: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._by_poll: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._local_seqs: OrderedDict[int, None] = OrderedDict()
        self._own_prefix = '{"o":' + json.dumps(self.origin) + ","
        # Durable commits wanted (the session's synchronous_commit is not off): the hot writers commit
        # asynchronously under the writer lock, then FLUSH (same pipeline) waits for the WAL outside it.
        self._flush_after: bool = str(self._one("SHOW synchronous_commit")[0]) != "off"
        self._wake_last: int = int(self._one("SELECT coalesce(max(last_wake), 0) FROM queue_heads")[0])
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
        """Run a read, or a write that has the same effect when run twice, on a pooled connection. A
        connection that broke (the server restarted, the pool held a dead socket) is replaced and the
        work retried; so is a deadlock victim (rolled back: nothing happened)."""
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
        raise AssertionError("unreachable")

    def _once(self, work: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """Run a write that must not run twice (it would write twice), committed synchronously. When the
        connection breaks while the statement is out, nobody can tell whether it committed: that is an
        in-doubt error (retryable), never a second run and never a success."""
        for attempt in range(3):
            used: psycopg.Connection[Any] | None = None
            try:
                with self._pool.connection() as conn:
                    used = conn
                    return work(conn)
            except psycopg.errors.DeadlockDetected:
                if attempt == 2:
                    raise
            except psycopg.OperationalError as exc:
                if used is None or not used.broken:
                    raise  # no connection to be had, or an error the server answered: nothing committed
                raise _in_doubt(what, exc) from exc
        raise AssertionError("unreachable")

    @overload
    def _durable(
        self,
        query: str,
        params: Mapping[str, Any],
        what: str,
        *,
        many: Literal[False] = False,
        present: Callable[[psycopg.Connection[Any], Row | None], bool | None] | None = None,
        idempotent: bool = False,
    ) -> Row | None: ...

    @overload
    def _durable(
        self,
        query: str,
        params: Mapping[str, Any],
        what: str,
        *,
        many: Literal[True],
        present: Callable[[psycopg.Connection[Any], list[Row]], bool | None] | None = None,
        idempotent: bool = False,
    ) -> list[Row]: ...

    def _durable(
        self,
        query: str,
        params: Mapping[str, Any],
        what: str,
        *,
        many: bool = False,
        present: Callable[[psycopg.Connection[Any], Any], bool | None] | None = None,
        idempotent: bool = False,
    ) -> Any:
        """Call one of the writer functions of postgres_functions.sql (``query``, one statement, rows by
        column name), which commit asynchronously under the writer lock, and return its row (``many``: its
        rows) only once the commit is durable.

        The call, its commit and FLUSH go out together (a pipeline: one round trip) on one connection, so
        the flush waits on the same backend, right after the commit and outside the writer lock, and
        concurrent writers share one fsync. When the connection breaks before the flush answered, the
        commit may have died with a crashed server: if the call's answer had arrived, ``present(conn,
        answer)`` looks on a fresh connection whether the write is there (with DURABLE_READ, so "there"
        means durable). There: the answer stands. Known absent: lost with the crash, so it is run again (it
        cannot come back). Unknown: an in-doubt error, never a success. ``idempotent`` writes are simply
        run again whenever the connection broke.
        """
        for attempt in range(3):
            used: psycopg.Connection[Any] | None = None
            cur: psycopg.Cursor[Row] | None = None
            try:
                with self._pool.connection() as conn:
                    used = conn
                    cur = conn.cursor(row_factory=dict_row)
                    if self._flush_after:
                        with conn.pipeline():
                            conn.execute("BEGIN")
                            cur.execute(query, params)
                            conn.execute("COMMIT")
                            conn.execute(FLUSH)
                    else:
                        cur.execute(query, params)
                    return cur.fetchall() if many else cur.fetchone()
            except psycopg.OperationalError as exc:
                if used is None or not used.broken:
                    _roll_back(used)
                    if isinstance(exc, psycopg.errors.DeadlockDetected) and attempt < 2:
                        continue  # rolled back before the commit: nothing happened
                    raise  # no connection to be had, or an error the server answered: nothing committed
                if attempt == 2:
                    raise _in_doubt(what, exc) from exc
                answered = cur is not None and cur.pgresult is not None and cur.pgresult.status == TUPLES_OK
                if answered and present is not None:
                    assert cur is not None
                    answer = cur.fetchall() if many else cur.fetchone()
                    there = self._check_present(present, answer)
                    if there:
                        return answer
                    if there is not None:
                        log.warning("%s was lost with the PostgreSQL server (committed, not durable); again", what)
                        continue
                if not idempotent:
                    raise _in_doubt(what, exc) from exc
                log.warning("PostgreSQL connection lost during %s; running it again on a fresh one", what)
            except psycopg.Error:
                _roll_back(used)
                raise
        raise AssertionError("unreachable")

    def _check_present(self, present: Callable[[psycopg.Connection[Any], T], bool | None], result: T) -> bool | None:
        """``present(conn, result)`` on a fresh connection; None when that cannot be told either. A server
        that crashed is usually back within seconds (WAL replay), so the check waits up to
        PROVE_WITHIN_S for one: an answer proven is better than one in doubt."""
        deadline = time.monotonic() + PROVE_WITHIN_S
        while True:
            try:
                with self._pool.connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                    return present(conn, result)
            except psycopg.Error as exc:
                if time.monotonic() >= deadline:
                    log.warning("could not tell whether a write survived the lost connection: %s", exc)
                    return None
                time.sleep(0.1)

    def _durable_read(self) -> str:
        """The DURABLE_READ column for the reads whose rows async commits write (NULL when commits are not
        meant to be durable: a session with synchronous_commit off asked for exactly that)."""
        return DURABLE_READ if self._flush_after else "NULL"

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
