"""``python -m benchmarks.engine --growth``: do per-call costs stay flat as the store grows?

Four dimensions, three or four sizes each; for every size a fresh store is built, then each operation is
timed a few times (median). A JSON line per (dimension, operation, size) and one per (dimension,
operation) with the growth factor per 10x (the largest step). Rows whose cost follows the work the call
does (the watchers a recording fans out to, the pending notices a sweep re-queues) are divided by that
work (``per`` names the divisor), so every row printed should stay flat.

Stores are built by bulk SQL (the fastest honest path); :func:`verify_bulk` builds a small store both
ways, by bulk SQL and through the public API, and compares every row they hold, so the bulk path stays
what the API would have produced. The watcher and pending dimensions are built through the API.

On SQLite by default; ``--postgres [DSN]`` runs the same dimensions on PostgreSQL, each store in a
throwaway schema (dropped afterwards). There every row also carries its round trips per call
(:class:`RoundTrips`, from libpq's protocol trace) and a bare ``SELECT 1`` from the same pool is timed
next to the operations of every size.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from itertools import pairwise
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sessionwatch import Gateway
from sessionwatch.settings import Settings
from sessionwatch.store import open_store
from sessionwatch.store.records import EventInput

Emit = Callable[..., None]
AGENT = "main"
T0 = 1_700_000_000_000
WATCHER = f"agent:{AGENT}:w"

FULL = {
    "sessions": [1_000, 10_000, 100_000],
    "events": [50_000, 500_000, 5_000_000],
    "watchers": [1, 100, 1_000, 10_000],
    "pending": [100, 1_000, 10_000],
}
SMALL = {
    "sessions": [100, 1_000, 10_000],
    "events": [5_000, 50_000, 500_000],
    "watchers": [1, 10, 100, 1_000],
    "pending": [10, 100, 1_000],
}
# A list row measured by another module (sessions_list pagination) can register itself here:
# fn(gw) -> None, timed like any other operation of the sessions dimension.
EXTRA_SESSION_OPS: dict[str, Callable[[Gateway], None]] = {}


class FixedClock:
    """Time stands still: nothing ages out while a store is measured, and no timer thread runs."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def skey(i: int) -> str:
    return f"agent:{AGENT}:s{i}"


def _event(key: str, i: int, kind: str = "human_direct_message") -> EventInput:
    return EventInput(key, AGENT, kind, "human", f"bench event {i}", T0)


# -- building ---------------------------------------------------------------------------------------
# Numbers come from a recursive CTE; every row matches what the API writes for the same calls (see
# verify_bulk), except random session ids.
_NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)"


def _body(i_sql: str) -> str:
    return (
        '\'{"kind":"human_direct_message","actorType":"human","occurredAt":'
        + str(T0)
        + ',"summary":"bench event \' || '
        + i_sql
        + " || '\"}'"
    )


def bulk_sessions(path: str, n: int) -> None:
    """n sessions, one event each, every one watched (caught up) by WATCHER.

    API equivalent: put_session(s_i); record(human event i on s_i); watch(WATCHER, s_i)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
        " VALUES (?, ?, lower(hex(randomblob(16))), 'other', ?, ?)",
        (WATCHER, AGENT, T0, T0),
    )
    conn.execute(
        _NUMBERS + " INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
        f" SELECT 'agent:{AGENT}:s' || i, '{AGENT}', lower(hex(randomblob(16))), 'other', {T0}, {T0} FROM n",
        (n,),
    )
    base = conn.execute("SELECT coalesce(max(sequence), 0) FROM events").fetchone()[0]
    conn.execute(
        _NUMBERS + " INSERT INTO events (sequence, session_key, session_id, agent_id, kind, actor_type,"
        " occurred_at, summary, body)"
        f" SELECT {base} + i + 1, 'agent:{AGENT}:s' || i, NULL, '{AGENT}', 'human_direct_message', 'human',"
        f" {T0}, 'bench event ' || i, {_body('i')} FROM n",
        (n,),
    )
    conn.execute(
        "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
        " SELECT session_key, agent_id, max(sequence), ? FROM events GROUP BY session_key, agent_id"
        " ON CONFLICT DO UPDATE SET last_sequence = excluded.last_sequence",
        (T0,),
    )
    conn.execute(
        "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)"
        " SELECT ?, session_key, last_sequence, last_sequence, last_sequence, 'explicit', ? FROM heads",
        (WATCHER, T0),
    )
    conn.execute("INSERT INTO queue_heads (session_key) VALUES (?) ON CONFLICT DO NOTHING", (WATCHER,))
    conn.execute("COMMIT")
    conn.close()


def api_sessions(gw: Gateway, n: int) -> None:
    gw.put_session(WATCHER)
    for i in range(n):
        gw.put_session(skey(i))
        gw.record(_event(skey(i), i))
        gw.watch(WATCHER, skey(i))


def bulk_events(path: str, n: int, sessions: int, start: int = 0) -> None:
    """n events (numbered from ``start``) spread over ``sessions`` sessions, nobody watching.

    API equivalent: put_session(s_j) for each j; record(human event i on s_(i % sessions))."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    if start == 0:
        conn.execute(
            _NUMBERS + " INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at,"
            f" updated_at) SELECT 'agent:{AGENT}:s' || i, '{AGENT}', lower(hex(randomblob(16))), 'other',"
            f" {T0}, {T0} FROM n",
            (sessions,),
        )
    base = conn.execute("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").fetchone()[0]
    conn.execute(
        _NUMBERS + " INSERT INTO events (sequence, session_key, session_id, agent_id, kind, actor_type,"
        " occurred_at, summary, body)"
        f" SELECT {base} + i + 1, 'agent:{AGENT}:s' || ((i + {start}) % {sessions}), NULL, '{AGENT}',"
        f" 'human_direct_message', 'human', {T0}, 'bench event ' || (i + {start}), {_body(f'(i + {start})')}"
        " FROM n",
        (n,),
    )
    conn.execute(
        "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
        " SELECT session_key, agent_id, max(sequence), ? FROM events WHERE sequence > ?"
        " GROUP BY session_key, agent_id"
        " ON CONFLICT DO UPDATE SET last_sequence = excluded.last_sequence",
        (T0, base),
    )
    conn.execute("COMMIT")
    conn.close()


def api_events(gw: Gateway, n: int, sessions: int) -> None:
    for j in range(sessions):
        gw.put_session(skey(j))
    for i in range(n):
        gw.record(_event(skey(i % sessions), i))


# PostgreSQL: the same rows, numbered by generate_series; the events keep the sequences the identity
# column would have handed out (OVERRIDING SYSTEM VALUE, then the identity moves past them).
_PG_SESSION = (
    "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
    " SELECT %s || i, %s, md5(random()::text || i), 'other', %s, %s FROM generate_series(0, %s - 1) i"
)


def _pg_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url)


def _pg_identity(conn: Any) -> int:
    """The last sequence the events identity handed out (0 on a fresh store)."""
    seq = conn.execute("SELECT pg_get_serial_sequence('events', 'sequence')").fetchone()[0]
    last, called = conn.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
    return int(last) if called else 0


def _pg_events(conn: Any, base: int, n: int, sessions: int, start: int) -> None:
    body = (
        '\'{"kind":"human_direct_message","actorType":"human","occurredAt":'
        + str(T0)
        + ',"summary":"bench event \' || (i + %(start)s) || \'"}\''
    )
    conn.execute(
        "INSERT INTO events (sequence, session_key, session_id, agent_id, kind, actor_type, occurred_at, summary, body)"
        " OVERRIDING SYSTEM VALUE"
        " SELECT %(base)s + i + 1, %(prefix)s || ((i + %(start)s) %% %(sessions)s), NULL, %(agent)s,"
        " 'human_direct_message', 'human', %(t0)s, 'bench event ' || (i + %(start)s), "
        + body
        + " FROM generate_series(0, %(n)s - 1) i ORDER BY i",
        {
            "base": base,
            "prefix": f"agent:{AGENT}:s",
            "start": start,
            "sessions": sessions,
            "agent": AGENT,
            "t0": T0,
            "n": n,
        },
    )
    conn.execute("SELECT setval(pg_get_serial_sequence('events', 'sequence'), %s)", (base + n,))
    conn.execute(
        "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
        " SELECT session_key, agent_id, max(sequence), %s FROM events WHERE sequence > %s"
        " GROUP BY session_key, agent_id"
        " ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence",
        (T0, base),
    )


def pg_bulk_sessions(url: str, n: int) -> None:
    """bulk_sessions on PostgreSQL (same rows)."""
    with _pg_connect(url) as conn:
        conn.execute(
            "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
            " VALUES (%s, %s, md5(random()::text), 'other', %s, %s)",
            (WATCHER, AGENT, T0, T0),
        )
        conn.execute(_PG_SESSION, (f"agent:{AGENT}:s", AGENT, T0, T0, n))
        base = _pg_identity(conn)
        _pg_events(conn, base, n, n, 0)
        conn.execute(
            "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)"
            " SELECT %s, session_key, last_sequence, last_sequence, last_sequence, 'explicit', %s FROM heads",
            (WATCHER, T0),
        )
        conn.execute("INSERT INTO queue_heads (session_key) VALUES (%s) ON CONFLICT DO NOTHING", (WATCHER,))
        conn.commit()
        conn.execute("ANALYZE")  # as autovacuum would have, after a build through the API


def pg_bulk_events(url: str, n: int, sessions: int, start: int = 0) -> None:
    """bulk_events on PostgreSQL (same rows)."""
    with _pg_connect(url) as conn:
        if start == 0:
            conn.execute(_PG_SESSION, (f"agent:{AGENT}:s", AGENT, T0, T0, sessions))
        _pg_events(conn, _pg_identity(conn), n, sessions, start)
        conn.commit()
        if start == 0:
            conn.execute("ANALYZE")


_COMPARED = {
    "sessions": "SELECT session_key, agent_id, kind, spawned_by, label, created_at, updated_at FROM sessions",
    "events": "SELECT sequence, dedupe_key, session_key, agent_id, kind, actor_type, actor_id, run_id, occurred_at,"
    " summary, body FROM events",
    "heads": "SELECT * FROM heads",
    "cursors": "SELECT * FROM cursors",
    "queue_heads": "SELECT * FROM queue_heads",
    "system_events": "SELECT * FROM system_events",
}


def _sqlite_path(url: str) -> str:
    return url[len("sqlite:///") :]


class Backend(Protocol):
    """Where the stores of one run live, and how they are bulk-built and read back."""

    name: str

    def fresh(self, label: str) -> Any: ...  # a context manager yielding a store URL
    def bulk_sessions(self, url: str, n: int) -> None: ...
    def bulk_events(self, url: str, n: int, sessions: int, start: int = 0) -> None: ...
    def rows(self, url: str) -> dict[str, list[tuple[Any, ...]]]: ...


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp

    @contextmanager
    def fresh(self, label: str) -> Iterator[str]:
        d = tempfile.mkdtemp(prefix=f"sw-growth-{label}-", dir=self.tmp)
        try:
            yield f"sqlite:///{d}/state.db"
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def bulk_sessions(self, url: str, n: int) -> None:
        bulk_sessions(_sqlite_path(url), n)

    def bulk_events(self, url: str, n: int, sessions: int, start: int = 0) -> None:
        bulk_events(_sqlite_path(url), n, sessions, start)

    def rows(self, url: str) -> dict[str, list[tuple[Any, ...]]]:
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            return {t: sorted(conn.execute(sql).fetchall(), key=repr) for t, sql in _COMPARED.items()}
        finally:
            conn.close()


DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def with_params(dsn: str, **params: str) -> str:
    """``dsn`` with query parameters added (libpq reads them percent-decoded)."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


class PostgresBackend:
    """A throwaway schema per store, in the DSN's database; dropped when the store is done."""

    name = "postgresql"

    def __init__(self, dsn: str = DEFAULT_DSN) -> None:
        self.dsn = dsn

    @contextmanager
    def fresh(self, label: str) -> Iterator[str]:
        import psycopg

        schema = "sw_growth_" + re.sub(r"[^a-z0-9]+", "_", label.lower()) + "_" + uuid.uuid4().hex[:8]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield with_params(self.dsn, options=f"-csearch_path={schema}")
        finally:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def bulk_sessions(self, url: str, n: int) -> None:
        pg_bulk_sessions(url, n)

    def bulk_events(self, url: str, n: int, sessions: int, start: int = 0) -> None:
        pg_bulk_events(url, n, sessions, start)

    def rows(self, url: str) -> dict[str, list[tuple[Any, ...]]]:
        with _pg_connect(url) as conn:
            return {t: sorted(conn.execute(q).fetchall(), key=repr) for t, q in _COMPARED.items()}


def verify_bulk(tmp: str, backend: Backend | None = None) -> dict[str, int]:
    """Build small stores by bulk SQL and through the API; every compared row must be equal."""
    be = backend or SQLiteBackend(tmp)
    checked: dict[str, int] = {}
    builds: tuple[tuple[str, Callable[[str], None], Callable[[Gateway], None]], ...] = (
        ("sessions", lambda u: be.bulk_sessions(u, 40), lambda g: api_sessions(g, 40)),
        ("events", lambda u: be.bulk_events(u, 300, 7), lambda g: api_events(g, 300, 7)),
    )
    for name, bulk, api in builds:
        with be.fresh(f"verify-{name}-bulk") as bulk_url, be.fresh(f"verify-{name}-api") as api_url:
            found = []
            for how, url in (("bulk", bulk_url), ("api", api_url)):
                gw = Gateway(open_store(url), clock=FixedClock(), sweep=False)
                if how == "api":
                    api(gw)
                gw.close()
                if how == "bulk":
                    bulk(url)
                found.append(be.rows(url))
            a, b = found
            for table in _COMPARED:
                if a[table] != b[table]:
                    diff = next((x, y) for x, y in zip(a[table] + [None], b[table] + [None], strict=False) if x != y)
                    raise SystemExit(f"bulk build differs from the API build in {be.name} {name}/{table}: {diff}")
                checked[f"{name}.{table}"] = len(a[table])
    return checked


# -- round trips (PostgreSQL) -------------------------------------------------------------------------
class RoundTrips:
    """Counts client/server round trips of the PostgreSQL connections this process opens.

    While installed, every connection psycopg opens is remembered (except the LISTEN connection, which
    runs on its own thread, off every call's path). :meth:`count` turns libpq's protocol trace on for
    all of them around one call (and for connections the call opens, as ``Gateway.open`` does) and
    counts the server's ReadyForQuery messages: one per simple Query or extended-protocol Sync, i.e. one
    per round trip (a pipeline's statements, ended by one Sync, are one). Connection start-up and authentication are
    not counted. Statement preparation is off while counting (psycopg prepares a statement on its 5th
    use, an extra round trip once per connection; the steady state takes the same number without it).
    ``detail`` names each round trip by its statements, joined by `` + `` (BEGIN and COMMIT left out): an
    ``sw_*`` function, ``flush`` for the commit's WAL-flush wait (``connection.FLUSH``), else its first words.
    """

    def __init__(self, on_connect: Callable[[Any], None] | None = None) -> None:
        self._on_connect = on_connect  # called with every connection opened while installed
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._saved: tuple[Any, Any] | None = None
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the counter; uninstall() closes it
        self._traced: list[tuple[Any, Any]] | None = None  # (connection, its prepare_threshold) while counting

    def install(self) -> None:
        import psycopg

        original = psycopg.Connection.__dict__["connect"]
        self._saved = (original, psycopg.connect)

        def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
            conn = original.__func__(cls, *args, **kwargs)
            if self._on_connect is not None:
                self._on_connect(conn)
            if threading.current_thread().name != "sessionwatch-pg-listen":
                with self._lock:
                    self._conns = [c for c in self._conns if not c.closed] + [conn]
                    if self._traced is not None:
                        self._start(conn)
            return conn

        psycopg.Connection.connect = classmethod(connect)  # type: ignore[method-assign,assignment]
        psycopg.connect = psycopg.Connection.connect  # the module alias, which apply_migrations calls

    def uninstall(self) -> None:
        import psycopg

        if self._saved is not None:
            psycopg.Connection.connect, psycopg.connect = self._saved  # type: ignore[method-assign]
            self._saved = None
        self._file.close()

    def _start(self, conn: Any) -> None:
        from psycopg.pq import Trace

        assert self._traced is not None
        conn.pgconn.trace(self._file.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        self._traced.append((conn, conn.prepare_threshold))
        conn.prepare_threshold = None

    def count(self, fn: Callable[[], Any]) -> tuple[int, list[str]]:
        """Run ``fn`` once with every known connection traced; (round trips, what each one ran)."""
        self._file.seek(0)
        self._file.truncate()
        with self._lock:
            self._traced = []
            for conn in self._conns:
                if not conn.closed:
                    self._start(conn)
        try:
            fn()
        finally:
            with self._lock:
                for conn, threshold in self._traced:
                    if not conn.closed:
                        conn.pgconn.untrace()
                    conn.prepare_threshold = threshold
                self._traced = None
        self._file.seek(0)
        return self._parse(self._file.read().decode("utf-8", "replace"))

    @staticmethod
    def _parse(trace: str) -> tuple[int, list[str]]:
        detail: list[str] = []
        pending: list[str] = []  # what the statements since the last ReadyForQuery ran
        for line in trace.splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            direction, message = parts[0], parts[2]
            if direction == "F" and message in ("Query", "Parse"):
                text = parts[3] if len(parts) > 3 else ""
                if message == "Parse":  # Parse "name" "text" ...
                    m = re.match(r'\s*"[^"]*" "(.*)"', text, re.S)
                    text = m.group(1) if m else text
                label = _label(text)
                if label not in ("BEGIN", "COMMIT"):
                    pending.append(label)
            elif direction == "B" and message == "ReadyForQuery":
                detail.append(" + ".join(pending) or "?")
                pending = []
        return len(detail), detail


def _label(text: str) -> str:
    text = text.strip().strip('"')
    parts = re.split(r";\s*(?=BEGIN|COMMIT|SELECT|UPDATE|INSERT|DELETE)", text)
    if len(parts) > 1:  # statements sent together (simple protocol): one round trip
        return " + ".join(_label(p) for p in parts)
    m = re.search(r"\b(sw_[a-z_]+)\s*\(", text)
    if m:
        return m.group(1)
    if "pg_current_xact_id" in text:
        return "flush"
    if "pg_advisory_xact_lock" in text:
        return "lock"
    return " ".join(text.split()[:3])[:40]


class CpuPin:
    """Runs this process and the PostgreSQL server processes serving its connections on one CPU.

    A round trip to a server process waiting on another CPU pays for waking that CPU: on a virtual
    machine with an idle core that is ~70 µs (a bare SELECT 1 took 26 µs with both on one CPU, 95 µs
    across two), and which of the two a connection gets is chance, fixed for its lifetime. So one store
    size could be measured fast and the next slow for no reason of their own. Pinned, every size pays the
    same. Only where it can be done safely: Linux, a server on this host (loopback or a Unix socket),
    the connection's server process found under /proc as ``postgres``, and the permission to move it;
    otherwise nothing is pinned and ``pinned`` says so."""

    def __init__(self) -> None:
        self.cpu: int | None = None
        self.pinned = 0
        self.refused: str | None = None
        self._saved: set[int] | None = None

    def start(self) -> None:
        if not hasattr(os, "sched_setaffinity"):
            self.refused = "no CPU affinity on this platform"
            return
        self._saved = os.sched_getaffinity(0)
        self.cpu = min(self._saved)
        os.sched_setaffinity(0, {self.cpu})  # threads started from here on inherit it

    def stop(self) -> None:
        if self._saved is not None:
            os.sched_setaffinity(0, self._saved)
            self._saved = None

    def backend(self, conn: Any) -> None:
        if self.cpu is None:
            return
        host, pid = conn.info.host, conn.info.backend_pid
        if not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
            self.refused = f"the server is not on this host ({host})"
            return
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if not comm.read().startswith("postgres"):
                    self.refused = f"process {pid} is not a postgres server process"
                    return
            os.sched_setaffinity(pid, {self.cpu})
            self.pinned += 1
        except OSError as exc:
            self.refused = f"could not pin server process {pid}: {exc}"


# -- measuring ---------------------------------------------------------------------------------------
# What a call's time is measured with: the wall clock (what a caller waits; the benchmark's figures), or
# the CPU time of the calling thread (``cpu``: the suite's guard on a busy machine, where a long call is
# preempted more often than a short one and the wall clock makes growth look steeper than it is; the
# SQLite store does its work in the calling thread).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _median_us(
    fn: Callable[[], Any],
    reps: int,
    setup: Callable[[], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    times = []
    for _ in range(reps):
        if setup is not None:
            setup()
        t = clock()
        fn()
        times.append(clock() - t)
    return round(statistics.median(times) * 1e6, 1)


class Meter:
    """Times operations of one store size; on PostgreSQL also counts their round trips."""

    def __init__(self, reps: int, trips: RoundTrips | None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.reps = reps
        self.trips = trips
        self.clock = clock
        self.us: dict[str, float] = {}
        self.rt: dict[str, dict[str, Any]] = {}

    def time(
        self,
        name: str,
        fn: Callable[[], Any],
        reps: int | None = None,
        setup: Callable[[], Any] | None = None,
        per: int = 1,
    ) -> float:
        us = _median_us(fn, reps or self.reps, setup, self.clock)
        self.us[name] = round(us / per, 2) if per != 1 else us
        if self.trips is not None:
            self.count(name, fn, setup)
        return self.us[name]

    def count(self, name: str, fn: Callable[[], Any], setup: Callable[[], Any] | None = None) -> None:
        """Round trips of three more calls: the median, and what the median call ran."""
        assert self.trips is not None
        runs = []
        for _ in range(3):
            if setup is not None:
                setup()
            runs.append(self.trips.count(fn))
        runs.sort(key=lambda r: r[0])
        n, detail = runs[1]
        self.rt[name] = {
            "round_trips": n,
            "flushes": detail.count("flush"),
            "detail": detail,
            "range": [runs[0][0], runs[-1][0]],
        }


def _open(url: str, settings: Settings, *, sweep: bool = True) -> Gateway:
    return Gateway(open_store(url), clock=FixedClock(), settings=settings, sweep=sweep)


def _select1(m: Meter, gw: Gateway) -> None:
    """A bare SELECT 1 from the store's own pool: the floor every PostgreSQL row sits on."""
    run_sql = getattr(gw.store, "_run", None)
    if m.trips is not None and run_sql is not None:
        m.time("select1", lambda: run_sql(lambda c: c.execute("SELECT 1").fetchone()))


def _common_ops(m: Meter, gw: Gateway, target: str) -> None:
    """Reads of one session: status (the tool), changesSince (the last 10 events)."""
    head = gw.state_version(target)
    m.time("status", lambda: gw.call_tool("session_status", {"sessionKey": target}, caller=WATCHER))
    m.time("changesSince", lambda: gw.changes_since(target, max(0, head - 10)))


@functools.cache
def _scratch() -> tuple[bytearray, bytes]:
    """A buffer larger than the CPU caches of the machines this runs on, and a byte per cache line of it."""
    buf = bytearray(32 << 20)
    return buf, bytes(len(buf[::64]))


def _cold_caches() -> None:
    """Write one byte of every cache line of a buffer larger than the CPU caches, so they hold none of
    the store's data. The drain's untimed refill fans out to every watcher of the target, which at 10k
    watchers evicts the CPU caches by itself and at 1 watcher does not: without this the drain would be
    timed cold at one size and warm at another (a drain of 100 watchers' target measured 68 µs warm, 223
    µs after 16 MB of cache lines were written)."""
    buf, line = _scratch()
    buf[::64] = line


def _queue_ops(m: Meter, gw: Gateway, watcher: str, notify: Callable[[], Any]) -> None:
    """drain / peek / has-pending / ack for one watcher holding a few notices. Every drain is timed from
    cold CPU caches (_cold_caches), whatever its refill touched."""

    def fill() -> None:
        for _ in range(3):
            notify()

    def refill() -> None:
        fill()
        _cold_caches()

    fill()
    m.time("peek", lambda: gw.peek_system_events(watcher))
    m.time("hasPending", lambda: gw.store.has_pending_notice(watcher, gw.settings.queue_cap))
    m.time("drain", lambda: gw.drain_system_events(watcher), setup=refill)


def _catch_up(gw: Gateway) -> None:
    """Acknowledge everything WATCHER lags on (a notice evicted by the queue cap stays pending)."""
    gw.drain_system_events(WATCHER)
    for _ in range(3):
        lagging = [c.target for c in gw.store.cursors(watcher=WATCHER) if c.material > c.last_seen]
        if not lagging:
            return
        gw.acknowledge(WATCHER, lagging)
        gw.drain_system_events(WATCHER)


def dim_sessions(be: Backend, n: int, m: Meter) -> None:
    settings = Settings(max_events=10 * n + 1_000_000)
    with be.fresh(f"sessions-{n}") as url:
        _open(url, settings, sweep=False).close()
        be.bulk_sessions(url, n)
        gw = _open(url, settings)
        try:
            _select1(m, gw)
            k = iter(range(10**9))
            target = lambda: skey((next(k) * 7919) % n)  # noqa: E731 - spread over the store
            m.time("recording", lambda: gw.record(_event(target(), 0)))
            _catch_up(gw)
            _common_ops(m, gw, skey(n // 2))
            notify = iter(range(10**9))
            _queue_ops(m, gw, WATCHER, lambda: gw.record(_event(skey(next(notify) % 3), 1)))
            _catch_up(gw)
            tgt = [skey(1)]

            def notice() -> None:
                gw.record(_event(tgt[0], 2))

            m.time("ack", lambda: gw.acknowledge(WATCHER, tgt), setup=notice)
            _catch_up(gw)  # nothing pending: sweep, prune and open have nothing to do
            m.time("list", lambda: gw.list_sessions(agent_id=AGENT, limit=50))
            for name, fn in EXTRA_SESSION_OPS.items():
                m.time(name, partial(fn, gw))
            m.time("sweep", lambda: gw.store.sweep(gw._render, gw.clock(), gw.settings.queue_cap))
            m.time("prune", lambda: gw.prune(force=True))
        finally:
            gw.close()
        m.time("open", lambda: _open(url, settings).close(), max(3, m.reps // 4))


def dim_events(be: Backend, n: int, m: Meter) -> None:
    sessions = 1_000
    settings = Settings(max_events=n)
    with be.fresh(f"events-{n}") as url:
        _open(url, settings, sweep=False).close()
        be.bulk_events(url, n, sessions)
        gw = _open(url, settings)
        try:
            _select1(m, gw)
            gw.prune(force=True)  # at the cap: nothing over (and a first prune's one-time work is done)
            _common_ops(m, gw, skey(sessions // 2))
            k = iter(range(10**9))
            # recording at the cap, then prune it back: 1,000 rows over each time (bulk, untimed)
            start = [n]

            def over() -> None:  # a second connection, as another process would
                be.bulk_events(url, 1_000, sessions, start=start[0])
                start[0] += 1_000

            prune_reps = max(5, m.reps // 2)  # a median of few prunes is noisy on a shared machine
            deleted: list[int] = []
            m.time("prune", lambda: deleted.append(gw.prune(force=True).rows_deleted), prune_reps, setup=over)
            if any(d != 1_000 for d in deleted):
                raise SystemExit(f"prune at the cap deleted {deleted}, expected 1000 each time")
            m.time("recording", lambda: gw.record(_event(skey(next(k) % sessions), 0)))
        finally:
            gw.close()
        m.time("open", lambda: _open(url, settings).close(), max(3, m.reps // 4))


def dim_watchers(be: Backend, n: int, m: Meter) -> None:
    """n watchers on one target, built through the API; recording is per watcher it fans out to."""
    settings = Settings()
    target = skey(0)
    with be.fresh(f"watchers-{n}") as url:
        gw = _open(url, settings)
        try:
            _select1(m, gw)
            gw.put_session(target)
            watchers = [f"agent:{AGENT}:w{i}" for i in range(n)]
            for w in watchers:
                gw.put_session(w)
                gw.watch(w, target)
            first = watchers[0]
            m.time("recording", lambda: gw.record(_event(target, 0)), max(3, m.reps // 3), per=n)
            _common_ops(m, gw, target)
            _queue_ops(m, gw, first, lambda: gw.record(_event(target, 1)))
        finally:
            gw.close()


def dim_pending(be: Backend, n: int, m: Meter) -> None:
    """n pending notices (n watchers, one lagging pair each), built through the API; sweep and open are
    per pending pair (they re-queue each)."""
    settings = Settings()
    target = skey(0)
    with be.fresh(f"pending-{n}") as url:
        gw = _open(url, settings)
        try:
            _select1(m, gw)
            gw.put_session(target)
            for i in range(n):
                w = f"agent:{AGENT}:w{i}"
                gw.put_session(w)
                gw.watch(w, target)
            gw.record(_event(target, 0))
            m.time(
                "sweep",
                lambda: gw.store.sweep(gw._render, gw.clock(), gw.settings.queue_cap),
                max(3, m.reps // 3),
                per=n,
            )
            first = f"agent:{AGENT}:w0"
            m.time("peek", lambda: gw.peek_system_events(first))
            m.time("hasPending", lambda: gw.store.has_pending_notice(first, gw.settings.queue_cap))
        finally:
            gw.close()
        m.time("open", lambda: _open(url, settings).close(), 3, per=n)


DIMENSIONS: dict[str, Callable[[Backend, int, Meter], None]] = {
    "sessions": dim_sessions,
    "events": dim_events,
    "watchers": dim_watchers,
    "pending": dim_pending,
}
PER = {("watchers", "recording"): "watcher", ("pending", "sweep"): "pending", ("pending", "open"): "pending"}
# Rows whose cost is bounded rather than flat: an explicit prune with nothing due examines the next
# slice of cursors (CURSOR_SLICE rows), so it grows until the store holds more cursors than a slice.
BOUNDED = {("sessions", "prune")}
# Rows that still grow, left for later work (docs/benchmarks.md would say why): none. The last one, the
# drain of one watcher of a target with N watchers, was the CPU caches its untimed refill evicts at large N
# only; every drain is now timed from cold caches (_cold_caches), and its statements cost the same at 1k
# and 10k watchers.
KNOWN: set[tuple[str, str]] = set()
# PostgreSQL: the most round trips each per-call operation may take, not counting its commit's WAL-flush
# wait (tests/bench/test_growth_postgres.py). One each, no chains: status reads the session with its head
# (Store.get_session_with_version); drain and ack-by-id are one call of sw_drain, the sweep one of
# sw_sweep (both decode and render context keys in SQL, the twins of notices.py; the notice texts are
# still rendered in Python, from the rows returned). Prune (a claim, then bounded batches) and open (a
# start-up sequence) are reported, not bounded.
ROUND_TRIPS = {
    "select1": 1,
    "recording": 1,
    "status": 1,
    "changesSince": 1,
    "peek": 1,
    "hasPending": 1,
    "list": 1,
    "ack": 1,
    "drain": 1,
    "sweep": 1,
}
# The floor, not an operation: reported next to the others, never guarded.
REFERENCE = {"select1"}
GUARDED = lambda dim, op: (dim, op) not in BOUNDED and (dim, op) not in KNOWN and op not in REFERENCE  # noqa: E731


def growth_factors(sizes: list[int], figures: list[dict[str, float]]) -> dict[str, float]:
    """The largest growth per 10x of each operation (steps of other ratios scaled to 10x)."""
    import math

    out: dict[str, float] = {}
    for op in figures[0]:
        worst = 0.0
        for (a, fa), (b, fb) in pairwise(zip(sizes, figures, strict=True)):
            if op in fa and op in fb and fa[op] > 0:
                worst = max(worst, (fb[op] / fa[op]) ** (1 / math.log10(b / a)))
        out[op] = round(worst, 2)
    return out


def run(
    emit: Emit,
    *,
    small: bool,
    tmp: str | None = None,
    only: set[str] | None = None,
    reps: int = 30,
    postgres: str | None = None,
    runs: int = 1,
    clock: str = "wall",
) -> dict[str, dict[str, float]]:
    """Every dimension, every size; returns {dimension: {operation: growth per 10x}}.

    ``runs``: measure every size that many times, each on a fresh store, in whole rounds over the sizes,
    and report the median of the runs (each line also lists the runs' figures).

    ``postgres``: a DSN; the stores are then throwaway schemas in its database, and every line also
    carries the round trips per call and the same size's bare ``SELECT 1``.

    ``clock``: ``wall`` (the default), or ``cpu``, the calling thread's CPU time (SQLite only: on
    PostgreSQL the work is the server's)."""
    if clock not in CLOCKS or (clock == "cpu" and postgres):
        raise ValueError(f"clock must be one of {sorted(CLOCKS)} ('cpu' on SQLite only), not {clock!r}")
    sizes = SMALL if small else FULL
    tmp = tmp or tempfile.gettempdir()
    be: Backend = PostgresBackend(postgres) if postgres else SQLiteBackend(tmp)
    pin = CpuPin() if postgres else None
    trips = RoundTrips(on_connect=pin.backend if pin is not None else None) if postgres else None
    emit(
        "growth-run",
        backend=be.name,
        small=small,
        reps=reps,
        runs=runs,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    work = tempfile.mkdtemp(prefix="sw-growth-verify-", dir=tmp)
    try:
        emit("growth-verify", backend=be.name, rows=verify_bulk(work, be))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if trips is not None:
        trips.install()
    if pin is not None:
        pin.start()
    result: dict[str, dict[str, float]] = {}
    try:
        for dim, fn in DIMENSIONS.items():
            if only and dim not in only:
                continue
            measured: dict[int, list[Meter]] = {n: [] for n in sizes[dim]}
            for r in range(runs):  # whole rounds over the sizes, so a slow spell of the machine hits all
                for n in sizes[dim]:
                    t = time.perf_counter()
                    m = Meter(reps, trips, CLOCKS[clock])
                    fn(be, n, m)
                    measured[n].append(m)
                    emit("growth-size", dimension=dim, size=n, run=r, took_s=round(time.perf_counter() - t, 1))
            figures = []
            for n in sizes[dim]:
                ms = measured[n]
                us_of = {op: statistics.median(m.us[op] for m in ms) for op in ms[0].us}
                figures.append(us_of)
                floor = us_of.get("select1")
                for op, us in us_of.items():
                    line: dict[str, Any] = {
                        "dimension": dim,
                        "size": n,
                        "operation": op,
                        "us": us,
                        "per": PER.get((dim, op), "call"),
                    }
                    if runs > 1:
                        line["runs"] = [m.us[op] for m in ms]
                    if be.name != "sqlite":
                        line["backend"] = be.name
                    if op in ms[0].rt:
                        line.update(ms[0].rt[op])
                        if op in ROUND_TRIPS:
                            line["budget"] = ROUND_TRIPS[op]
                    if floor is not None and op != "select1":
                        line["select1_us"] = floor
                    emit("growth", **line)
            factors = growth_factors(sizes[dim], figures)
            for op, f in factors.items():
                emit(
                    "growth-factor",
                    dimension=dim,
                    operation=op,
                    per10x=f,
                    guarded=GUARDED(dim, op),
                    us=[fig.get(op) for fig in figures],
                    sizes=sizes[dim],
                )
            result[dim] = factors
    finally:
        if trips is not None:
            trips.uninstall()
        if pin is not None:
            pin.stop()
            emit("growth-pin", cpu=pin.cpu, server_processes_pinned=pin.pinned, refused=pin.refused)
    return result


def main(
    emit: Emit,
    *,
    small: bool,
    tmp: str | None,
    only: str | None,
    limit: float | None,
    postgres: str | None = None,
    runs: int = 1,
) -> int:
    factors = run(emit, small=small, tmp=tmp, only=set(only.split(",")) if only else None, postgres=postgres, runs=runs)
    worst = max(
        ((f, d, op) for d, ops in factors.items() for op, f in ops.items() if GUARDED(d, op)), default=(0.0, "", "")
    )
    emit("growth-summary", worst_per10x=worst[0], dimension=worst[1], operation=worst[2], limit=limit)
    if limit is not None and worst[0] > limit:
        print(json.dumps({"op": "growth-fail", "message": f"{worst[1]}/{worst[2]} grows {worst[0]}x per 10x"}))
        return 1
    return 0
