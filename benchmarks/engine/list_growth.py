"""How ``sessions_list`` costs grow with the number of sessions, and what its indexes cost on writes.

``python -m benchmarks.engine.list_growth [--store postgresql://...] [--quick]`` prints JSON lines: the
median cost of one page per store size, the growth factor per 10x, and the write cost of the listing
indexes (migration 0005). The growth benchmark calls ``list_growth`` and ``index_write_cost`` directly.

Stores are filled by bulk SQL (``executemany`` on SQLite, ``COPY`` on PostgreSQL) with the rows
``put_session`` writes; ``verify_bulk`` checks that a bulk-filled store lists exactly like one filled
through the API.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from itertools import pairwise
from typing import Any

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock

Emit = Callable[..., None]
AGENTS = 10
START_MS = 1_700_000_000_000
_COLS = "session_key, agent_id, session_id, kind, created_at, updated_at"
INDEXES = (
    "sessions_by_created",
    "sessions_by_agent_created",
    "sessions_by_kind_created",
    "sessions_by_agent_kind_created",
)


def _kind(i: int) -> str:
    # mostly main/direct/group/subagent; cron is rare (1 in 97), so a cron filter must not scan the rest
    return "cron" if i % 97 == 0 else ("main", "direct", "group", "subagent")[i % 4]


def session_rows(n: int, start: int = 0) -> list[tuple[str, str, str, str, int, int]]:
    """n sessions over AGENTS agents, one created per millisecond (two per millisecond every 5th)."""
    rows = []
    for i in range(start, start + n):
        ms = START_MS + i - i // 5
        rows.append((f"agent:a{i % AGENTS}:s{i}", f"a{i % AGENTS}", uuid.uuid4().hex, _kind(i), ms, ms))
    return rows


def bulk_sessions(gw: Gateway, rows: list[tuple[str, str, str, str, int, int]]) -> None:
    """The fastest honest path: the same rows put_session writes, in one transaction."""
    store: Any = gw.store
    if hasattr(store, "_tx"):
        with store._tx() as conn:
            conn.executemany(f"INSERT INTO sessions ({_COLS}) VALUES (?,?,?,?,?,?)", rows)
            conn.execute("ANALYZE")
        return

    def work(conn: Any) -> None:
        with conn.transaction(), conn.cursor() as cur, cur.copy(f"COPY sessions ({_COLS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.execute("ANALYZE sessions")

    store._run(work)


def _walk(gw: Gateway) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = gw.list_sessions_page(limit=97, cursor=cursor)
        out += [{k: v for k, v in r.to_json().items() if k != "sessionId"} for r in page.rows]
        cursor = page.next_cursor
        if cursor is None:
            return out


def verify_bulk(api_url: str, bulk_url: str, n: int = 300) -> None:
    """A store filled through put_session and one filled by bulk SQL list the same, page by page."""
    clock = ManualClock(START_MS)
    rows = session_rows(n)
    with Gateway.open(api_url, clock=clock, timers=False) as gw:
        for key, agent, _, kind, ms, _ in rows:
            clock.now = ms
            gw.put_session(key, agent_id=agent, kind=kind)
        via_api = _walk(gw)
    with Gateway.open(bulk_url, clock=ManualClock(START_MS), timers=False) as gw:
        bulk_sessions(gw, rows)
        via_bulk = _walk(gw)
    if via_api != via_bulk or len(via_api) != n:
        raise AssertionError("the bulk-filled store does not list like the API-filled one")


def _median_us(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm the caches and the statement cache
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e6, 1)


def measure_list(gw: Gateway, reps: int = 30) -> dict[str, float]:
    """Median microseconds of one sessions_list page (limit 50) per filter shape, through the tool."""
    caller = "agent:a3:main"
    mid = gw.list_sessions_page(agent_id="a3", limit=500).next_cursor  # a page deep in the listing

    def tool(args: dict[str, Any], scope: frozenset[str] | None = None) -> Callable[[], Any]:
        def call() -> int:
            out = gw.call_tool("sessions_list", dict(args, limit=50), caller=caller, scope=scope)
            assert "error" not in out, out
            return len(out["sessions"])

        return call

    calls = {
        "list_agent": tool({"agentId": "a3"}),
        "list_agent_next_page": tool({"agentId": "a3", "cursor": mid} if mid else {"agentId": "a3"}),
        "list_all": tool({}),
        # returns fewer than 50 rows on small stores (cron is 1 in 97): its cost follows the rows returned
        "list_agent_rare_kind": tool({"agentId": "a3", "kinds": ["cron"]}),
        "list_kinds": tool({"kinds": ["cron", "group"]}),
        "list_scoped_3_agents": tool({}, frozenset({"a1", "a2", "a3"})),
    }
    out = {op: _median_us(fn, reps) for op, fn in calls.items()}
    out["rows_agent_rare_kind"] = float(calls["list_agent_rare_kind"]())
    return out


def list_growth(
    store: Callable[[str], AbstractContextManager[str]],
    emit: Emit,
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
    reps: int = 30,
) -> dict[int, dict[str, float]]:
    """Build a store per size (``store(label)`` yields a fresh URL), time the listing, emit JSON lines."""
    figures: dict[int, dict[str, float]] = {}
    for n in sizes:
        with store(f"list-{n}") as url, Gateway.open(url, clock=ManualClock(START_MS + n), timers=False) as gw:
            bulk_sessions(gw, session_rows(n))
            figures[n] = measure_list(gw, reps)
            emit("sessions_list", sessions=n, **figures[n])
    for small, big in pairwise(sizes):
        tens = math.log10(big / small)  # growth is reported per 10x of sessions
        emit(
            "sessions_list_growth",
            sessions=f"{small}->{big}",
            **{
                op: round((figures[big][op] / figures[small][op]) ** (1 / tens), 2)
                for op in figures[small]
                if op.startswith("list_")
            },
        )
    return figures


def index_write_cost(url: str, emit: Emit, n: int = 10_000, writes: int = 300) -> dict[str, float]:
    """Median cost of creating and of updating a session with the listing indexes and without them."""
    out: dict[str, float] = {}
    clock = ManualClock(START_MS + 10 * n)
    with Gateway.open(url, clock=clock, timers=False) as gw:
        bulk_sessions(gw, session_rows(n))
        store: Any = gw.store
        counter = iter(range(10**9))

        def create() -> None:
            clock.advance(1)
            gw.put_session(f"agent:a1:w{next(counter)}")

        def update() -> None:
            clock.advance(1)
            i = next(counter) % n
            gw.set_goal(f"agent:a{i % AGENTS}:s{i}", "create", objective="bench")

        drop = "; ".join(f"DROP INDEX {name}" for name in INDEXES)
        for label in ("with_indexes", "without_indexes"):
            out[f"put_new_{label}_us"] = _median_us(create, writes)
            out[f"set_goal_{label}_us"] = _median_us(update, writes)
            if label == "with_indexes":
                if hasattr(store, "_tx"):
                    with store._tx() as conn:
                        for name in INDEXES:
                            conn.execute(f"DROP INDEX {name}")
                else:
                    store._run(lambda c: c.execute(drop))
        out["put_new_ratio"] = round(out["put_new_with_indexes_us"] / out["put_new_without_indexes_us"], 2)
        out["set_goal_ratio"] = round(out["set_goal_with_indexes_us"] / out["set_goal_without_indexes_us"], 2)
    emit("sessions_list_index_write_cost", sessions=n, **out)
    return out


def main(argv: list[str] | None = None) -> None:
    from benchmarks.engine.__main__ import _emit, _store

    p = argparse.ArgumentParser(prog="python -m benchmarks.engine.list_growth", description=__doc__)
    p.add_argument("--store", help="postgresql://user@host:port/anydb (a fresh database per size)")
    p.add_argument("--quick", action="store_true", help="sizes 100/1k/10k instead of 1k/10k/100k")
    a = p.parse_args(argv)
    tmp = tempfile.gettempdir()

    def store(label: str) -> AbstractContextManager[str]:
        return _store(a.store, tmp, label)

    with store("verify-api") as api_url, store("verify-bulk") as bulk_url:
        verify_bulk(api_url, bulk_url)
    _emit("bulk_verified", rows=300)
    sizes = (100, 1_000, 10_000) if a.quick else (1_000, 10_000, 100_000)
    list_growth(store, _emit, sizes)
    with store("write-cost") as url:
        index_write_cost(url, _emit, n=sizes[1])


if __name__ == "__main__":
    main()
