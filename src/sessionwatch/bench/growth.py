"""``python -m sessionwatch.bench --growth``: do per-call costs stay flat as the store grows?

Four dimensions, three or four sizes each; for every size a fresh store is built, then each operation is
timed a few times (median). A JSON line per (dimension, operation, size) and one per (dimension,
operation) with the growth factor per 10x (the largest step). Rows whose cost follows the work the call
does (the watchers a recording fans out to, the pending notices a sweep re-queues) are divided by that
work (``per`` names the divisor), so every row printed should stay flat.

Stores are built by bulk SQL (the fastest honest path); :func:`verify_bulk` builds a small store both
ways, by bulk SQL and through the public API, and compares every row they hold, so the bulk path stays
what the API would have produced. The watcher and pending dimensions are built through the API.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import Gateway
from ..settings import Settings
from ..store import open_store
from ..store.records import EventInput

Emit = Callable[..., None]
AGENT = "main"
T0 = 1_700_000_000_000
WATCHER = f"agent:{AGENT}:w"

FULL = {"sessions": [1_000, 10_000, 100_000], "events": [50_000, 500_000, 5_000_000],
        "watchers": [1, 100, 1_000, 10_000], "pending": [100, 1_000, 10_000]}
SMALL = {"sessions": [100, 1_000, 10_000], "events": [5_000, 50_000, 500_000],
         "watchers": [1, 10, 100, 1_000], "pending": [10, 100, 1_000]}
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
    return ("'{\"kind\":\"human_direct_message\",\"actorType\":\"human\",\"occurredAt\":" + str(T0)
            + ",\"summary\":\"bench event ' || " + i_sql + " || '\"}'")


def bulk_sessions(path: str, n: int) -> None:
    """n sessions, one event each, every one watched (caught up) by WATCHER.

    API equivalent: put_session(s_i); record(human event i on s_i); watch(WATCHER, s_i)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
                 " VALUES (?, ?, lower(hex(randomblob(16))), 'other', ?, ?)", (WATCHER, AGENT, T0, T0))
    conn.execute(_NUMBERS + " INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
                 f" SELECT 'agent:{AGENT}:s' || i, '{AGENT}', lower(hex(randomblob(16))), 'other', {T0}, {T0} FROM n",
                 (n,))
    base = conn.execute("SELECT coalesce(max(sequence), 0) FROM events").fetchone()[0]
    conn.execute(_NUMBERS + " INSERT INTO events (sequence, session_key, session_id, agent_id, kind, actor_type,"
                 " occurred_at, summary, body)"
                 f" SELECT {base} + i + 1, 'agent:{AGENT}:s' || i, NULL, '{AGENT}', 'human_direct_message', 'human',"
                 f" {T0}, 'bench event ' || i, {_body('i')} FROM n", (n,))
    conn.execute("INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
                 " SELECT session_key, agent_id, max(sequence), ? FROM events GROUP BY session_key, agent_id"
                 " ON CONFLICT DO UPDATE SET last_sequence = excluded.last_sequence", (T0,))
    conn.execute("INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at)"
                 " SELECT ?, session_key, last_sequence, last_sequence, last_sequence, 'explicit', ? FROM heads",
                 (WATCHER, T0))
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
        conn.execute(_NUMBERS + " INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at,"
                     f" updated_at) SELECT 'agent:{AGENT}:s' || i, '{AGENT}', lower(hex(randomblob(16))), 'other',"
                     f" {T0}, {T0} FROM n", (sessions,))
    base = conn.execute("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").fetchone()[0]
    conn.execute(_NUMBERS + " INSERT INTO events (sequence, session_key, session_id, agent_id, kind, actor_type,"
                 " occurred_at, summary, body)"
                 f" SELECT {base} + i + 1, 'agent:{AGENT}:s' || ((i + {start}) % {sessions}), NULL, '{AGENT}',"
                 f" 'human_direct_message', 'human', {T0}, 'bench event ' || (i + {start}), {_body(f'(i + {start})')}"
                 " FROM n", (n,))
    conn.execute("INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
                 " SELECT session_key, agent_id, max(sequence), ? FROM events WHERE sequence > ?"
                 " GROUP BY session_key, agent_id"
                 " ON CONFLICT DO UPDATE SET last_sequence = excluded.last_sequence", (T0, base))
    conn.execute("COMMIT")
    conn.close()


def api_events(gw: Gateway, n: int, sessions: int) -> None:
    for j in range(sessions):
        gw.put_session(skey(j))
    for i in range(n):
        gw.record(_event(skey(i % sessions), i))


_COMPARED = {
    "sessions": "SELECT session_key, agent_id, kind, spawned_by, label, created_at, updated_at FROM sessions",
    "events": "SELECT sequence, dedupe_key, session_key, agent_id, kind, actor_type, actor_id, run_id, occurred_at,"
              " summary, body FROM events",
    "heads": "SELECT * FROM heads",
    "cursors": "SELECT * FROM cursors",
    "queue_heads": "SELECT * FROM queue_heads",
    "system_events": "SELECT * FROM system_events",
}


def _rows(path: str) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {t: sorted(conn.execute(sql).fetchall(), key=repr) for t, sql in _COMPARED.items()}
    finally:
        conn.close()


def verify_bulk(tmp: str) -> dict[str, int]:
    """Build small stores by bulk SQL and through the API; every compared row must be equal."""
    checked: dict[str, int] = {}
    for name, bulk, api in (("sessions", lambda p: bulk_sessions(p, 40), lambda g: api_sessions(g, 40)),
                            ("events", lambda p: bulk_events(p, 300, 7), lambda g: api_events(g, 300, 7))):
        paths = []
        for how in ("bulk", "api"):
            path = os.path.join(tmp, f"verify-{name}-{how}.db")
            gw = Gateway(open_store(f"sqlite:///{path}"), clock=FixedClock(), sweep=False)
            if how == "api":
                api(gw)
            gw.close()
            if how == "bulk":
                bulk(path)
            paths.append(path)
        a, b = _rows(paths[0]), _rows(paths[1])
        for table in _COMPARED:
            if a[table] != b[table]:
                diff = next((x, y) for x, y in zip(a[table] + [None], b[table] + [None]) if x != y)  # type: ignore[operator]
                raise SystemExit(f"bulk build differs from the API build in {name}/{table}: {diff}")
            checked[f"{name}.{table}"] = len(a[table])
    return checked


# -- measuring ---------------------------------------------------------------------------------------
def _median_us(fn: Callable[[], Any], reps: int, setup: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(reps):
        if setup is not None:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e6, 1)


@contextmanager
def _fresh(tmp: str, label: str) -> Iterator[str]:
    d = tempfile.mkdtemp(prefix=f"sw-growth-{label}-", dir=tmp)
    try:
        yield os.path.join(d, "state.db")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _open(path: str, settings: Settings, *, sweep: bool = True) -> Gateway:
    return Gateway(open_store(f"sqlite:///{path}"), clock=FixedClock(), settings=settings, sweep=sweep)


def _common_ops(gw: Gateway, target: str, reps: int) -> dict[str, float]:
    """Reads of one session: status (the tool), changesSince (the last 10 events)."""
    head = gw.state_version(target)
    return {
        "status": _median_us(lambda: gw.call_tool("session_status", {"sessionKey": target}, caller=WATCHER), reps),
        "changesSince": _median_us(lambda: gw.changes_since(target, max(0, head - 10)), reps),
    }


def _queue_ops(gw: Gateway, watcher: str, notify: Callable[[], Any], reps: int) -> dict[str, float]:
    """drain / peek / has-pending / ack for one watcher holding a few notices."""
    def fill() -> None:
        for _ in range(3):
            notify()
    fill()
    out = {
        "peek": _median_us(lambda: gw.peek_system_events(watcher), reps),
        "hasPending": _median_us(lambda: gw.store.has_pending_notice(watcher, gw.settings.queue_cap), reps),
    }
    out["drain"] = _median_us(lambda: gw.drain_system_events(watcher), reps, setup=fill)
    return out


def _catch_up(gw: Gateway) -> None:
    """Acknowledge everything WATCHER lags on (a notice evicted by the queue cap stays pending)."""
    gw.drain_system_events(WATCHER)
    for _ in range(3):
        lagging = [c.target for c in gw.store.cursors(watcher=WATCHER) if c.material > c.last_seen]
        if not lagging:
            return
        gw.acknowledge(WATCHER, lagging)
        gw.drain_system_events(WATCHER)


def dim_sessions(tmp: str, n: int, reps: int) -> dict[str, float]:
    settings = Settings(max_events=10 * n + 1_000_000)
    with _fresh(tmp, f"sessions-{n}") as path:
        _open(path, settings, sweep=False).close()
        bulk_sessions(path, n)
        gw = _open(path, settings)
        try:
            k = iter(range(10**9))
            target = lambda: skey((next(k) * 7919) % n)  # noqa: E731 - spread over the store
            out: dict[str, float] = {}
            out["recording"] = _median_us(lambda: gw.record(_event(target(), 0)), reps)
            _catch_up(gw)
            out.update(_common_ops(gw, skey(n // 2), reps))
            notify = iter(range(10**9))
            out.update(_queue_ops(gw, WATCHER, lambda: gw.record(_event(skey(next(notify) % 3), 1)), reps))
            _catch_up(gw)
            tgt = [skey(1)]

            def notice() -> None:
                gw.record(_event(tgt[0], 2))
            out["ack"] = _median_us(lambda: gw.acknowledge(WATCHER, tgt), reps, setup=notice)
            _catch_up(gw)  # nothing pending: sweep, prune and open have nothing to do
            out["list"] = _median_us(lambda: gw.list_sessions(agent_id=AGENT, limit=50), reps)
            for name, fn in EXTRA_SESSION_OPS.items():
                out[name] = _median_us(lambda: fn(gw), reps)
            out["sweep"] = _median_us(lambda: gw.store.sweep(gw._render, gw.clock(), gw.settings.queue_cap), reps)
            out["prune"] = _median_us(lambda: gw.prune(force=True), reps)
        finally:
            gw.close()
        out["open"] = _median_us(lambda: _open(path, settings).close(), max(3, reps // 4))
    return out


def dim_events(tmp: str, n: int, reps: int) -> dict[str, float]:
    sessions = 1_000
    settings = Settings(max_events=n)
    with _fresh(tmp, f"events-{n}") as path:
        _open(path, settings, sweep=False).close()
        bulk_events(path, n, sessions)
        gw = _open(path, settings)
        try:
            gw.prune(force=True)  # at the cap: nothing over (and a first prune's one-time work is done)
            out = _common_ops(gw, skey(sessions // 2), reps)
            k = iter(range(10**9))
            # recording at the cap, then prune it back: 1,000 rows over each time (bulk, untimed)
            start = [n]

            def over() -> None:  # a second connection, as another process would
                bulk_events(path, 1_000, sessions, start=start[0])
                start[0] += 1_000
            prune_reps = max(5, reps // 2)  # a median of few prunes is noisy on a shared machine
            deleted: list[int] = []
            out["prune"] = _median_us(lambda: deleted.append(gw.prune(force=True).rows_deleted), prune_reps,
                                      setup=over)
            if any(d != 1_000 for d in deleted):
                raise SystemExit(f"prune at the cap deleted {deleted}, expected 1000 each time")
            out["recording"] = _median_us(lambda: gw.record(_event(skey(next(k) % sessions), 0)), reps)
        finally:
            gw.close()
        out["open"] = _median_us(lambda: _open(path, settings).close(), max(3, reps // 4))
    return out


def dim_watchers(tmp: str, n: int, reps: int) -> dict[str, float]:
    """n watchers on one target, built through the API; recording is per watcher it fans out to."""
    settings = Settings()
    target = skey(0)
    with _fresh(tmp, f"watchers-{n}") as path:
        gw = _open(path, settings)
        try:
            gw.put_session(target)
            watchers = [f"agent:{AGENT}:w{i}" for i in range(n)]
            for w in watchers:
                gw.put_session(w)
                gw.watch(w, target)
            first = watchers[0]
            rec = _median_us(lambda: gw.record(_event(target, 0)), max(3, reps // 3))
            out = {"recording": round(rec / n, 2)}
            out.update(_common_ops(gw, target, reps))
            out.update(_queue_ops(gw, first, lambda: gw.record(_event(target, 1)), reps))
        finally:
            gw.close()
    return out


def dim_pending(tmp: str, n: int, reps: int) -> dict[str, float]:
    """n pending notices (n watchers, one lagging pair each), built through the API; sweep and open are
    per pending pair (they re-queue each)."""
    settings = Settings()
    target = skey(0)
    with _fresh(tmp, f"pending-{n}") as path:
        gw = _open(path, settings)
        try:
            gw.put_session(target)
            for i in range(n):
                w = f"agent:{AGENT}:w{i}"
                gw.put_session(w)
                gw.watch(w, target)
            gw.record(_event(target, 0))
            out = {"sweep": round(_median_us(lambda: gw.store.sweep(gw._render, gw.clock(), gw.settings.queue_cap),
                                             max(3, reps // 3)) / n, 2)}
            first = f"agent:{AGENT}:w0"
            out["peek"] = _median_us(lambda: gw.peek_system_events(first), reps)
            out["hasPending"] = _median_us(lambda: gw.store.has_pending_notice(first, gw.settings.queue_cap), reps)
        finally:
            gw.close()
        out["open"] = round(_median_us(lambda: _open(path, settings).close(), 3) / n, 2)
    return out


DIMENSIONS: dict[str, Callable[[str, int, int], dict[str, float]]] = {
    "sessions": dim_sessions, "events": dim_events, "watchers": dim_watchers, "pending": dim_pending}
PER = {("watchers", "recording"): "watcher", ("pending", "sweep"): "pending", ("pending", "open"): "pending"}
# Rows whose cost is bounded rather than flat: an explicit prune with nothing due examines the next
# slice of cursors (CURSOR_SLICE rows), so it grows until the store holds more cursors than a slice.
BOUNDED = {("sessions", "prune")}
# Rows that still grow, left for later work (docs/benchmarks.md says why). A watcher's queue reads no
# longer walk its cursors (the slot chain, migration 0007), so only this one is left: the drain of one
# watcher of a target with N watchers measures 1.3-1.9x per 10x, every statement of it (BEGIN included)
# slower by about the same factor after the untimed fill that fans out to all N (cache and WAL, no walk).
KNOWN = {("watchers", "drain")}
GUARDED = lambda dim, op: (dim, op) not in BOUNDED and (dim, op) not in KNOWN  # noqa: E731


def growth_factors(sizes: list[int], figures: list[dict[str, float]]) -> dict[str, float]:
    """The largest growth per 10x of each operation (steps of other ratios scaled to 10x)."""
    import math

    out: dict[str, float] = {}
    for op in figures[0]:
        worst = 0.0
        for (a, fa), (b, fb) in zip(zip(sizes, figures), zip(sizes[1:], figures[1:])):
            if op in fa and op in fb and fa[op] > 0:
                worst = max(worst, (fb[op] / fa[op]) ** (1 / math.log10(b / a)))
        out[op] = round(worst, 2)
    return out


def run(emit: Emit, *, small: bool, tmp: str | None = None, only: set[str] | None = None,
        reps: int = 30) -> dict[str, dict[str, float]]:
    """Every dimension, every size; returns {dimension: {operation: growth per 10x}}."""
    sizes = SMALL if small else FULL
    tmp = tmp or tempfile.gettempdir()
    work = tempfile.mkdtemp(prefix="sw-growth-verify-", dir=tmp)
    try:
        emit("growth-verify", rows=verify_bulk(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result: dict[str, dict[str, float]] = {}
    for dim, fn in DIMENSIONS.items():
        if only and dim not in only:
            continue
        figures = []
        for n in sizes[dim]:
            t = time.perf_counter()
            fig = fn(tmp, n, reps)
            figures.append(fig)
            for op, us in fig.items():
                emit("growth", dimension=dim, size=n, operation=op, us=us, per=PER.get((dim, op), "call"))
            emit("growth-size", dimension=dim, size=n, took_s=round(time.perf_counter() - t, 1))
        factors = growth_factors(sizes[dim], figures)
        for op, f in factors.items():
            emit("growth-factor", dimension=dim, operation=op, per10x=f, guarded=GUARDED(dim, op),
                 us=[fig.get(op) for fig in figures], sizes=sizes[dim])
        result[dim] = factors
    return result


def main(emit: Emit, *, small: bool, tmp: str | None, only: str | None, limit: float | None) -> int:
    factors = run(emit, small=small, tmp=tmp, only=set(only.split(",")) if only else None)
    worst = max(((f, d, op) for d, ops in factors.items() for op, f in ops.items() if GUARDED(d, op)),
                default=(0.0, "", ""))
    emit("growth-summary", worst_per10x=worst[0], dimension=worst[1], operation=worst[2], limit=limit)
    if limit is not None and worst[0] > limit:
        print(json.dumps({"op": "growth-fail", "message": f"{worst[1]}/{worst[2]} grows {worst[0]}x per 10x"}))
        return 1
    return 0
