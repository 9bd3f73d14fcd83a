"""Recording throughput with 1, 4, 8 ... gateway processes sharing one PostgreSQL database, next to a
raw psycopg floor measured in the same run.

    python -m benchmarks.pg_scaling [--store postgresql://postgres@127.0.0.1:5432/postgres]
                                    [--procs 1,4,8] [--events 600] [--watchers 0,10]
                                    [--synchronous-commit on|off] [--no-floor] [--rounds 3]

For every (watchers, processes) pair: a fresh database, ``sessions`` sessions (each watched by
``watchers`` explicit watchers when > 0), then P processes each open their own Gateway and record
``events`` human_direct_message events round-robin over the sessions, one transaction each, all
starting together. Prints one JSON line per run (``{"op", "n", "seconds", "per_sec", ...}``, the shape
of ``python -m benchmarks.engine``) with the aggregate events/s, its ratio to one process, per-call
latency percentiles, and a check that the log holds exactly n dense sequences.

The floor (``pg_floor_procs<P>`` rows, on by default): P processes of plain psycopg, each append one
statement on an autocommit connection that inserts the same event row and upserts the session's head
(``WITH ... INSERT ... RETURNING`` then ``INSERT ... ON CONFLICT DO UPDATE``), committed with the same
``synchronous_commit`` as the gateways, so every append is one durable commit: what an append costs with
no sessionwatch around it. Each ``pg_record_*`` row then carries ``ratio_vs_floor`` (its events/s over the
floor's with the same number of processes). Floor and ours alternate for ``--rounds`` rounds, each on a
fresh database, and a row gives the medians and the median of the per-round ratios (each round's too):
on a machine shared with other work, the ratio of two runs side by side is what holds still.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks import child_env

AGENT = "main"


def _key(name: str) -> str:
    return f"agent:{AGENT}:{name}"


def _db_url(base: str, name: str, sync: str | None) -> str:
    parts = urlsplit(base)
    query = "options=-csynchronous_commit%3D" + sync if sync else ""
    return urlunsplit(parts._replace(path="/" + name, query=query))


def _pct(lat: list[float]) -> dict[str, float]:
    a = sorted(lat)
    at = lambda p: round(a[min(len(a) - 1, int(p * len(a)))] * 1e6, 1)  # noqa: E731
    return {"p50_us": at(0.5), "p99_us": at(0.99), "max_us": round(a[-1] * 1e6, 1)}


def worker(url: str, events: int, sessions: int, worker_id: int) -> None:
    """One gateway process: open, say ready, wait for go, record, report."""
    from sessionwatch import Gateway
    from sessionwatch.store.records import EventInput

    keys = [_key(f"bench-s{i}") for i in range(sessions)]
    gw = Gateway.open(url, timers=False)
    print("ready", flush=True)
    sys.stdin.readline()
    lat: list[float] = []
    failures = 0
    clock = time.perf_counter
    t0 = clock()
    for i in range(events):
        a = clock()
        out = gw.record(
            EventInput(
                keys[(i + worker_id) % sessions],
                AGENT,
                "human_direct_message",
                "human",
                f"bench event {worker_id}.{i}",
                None,  # type: ignore[arg-type]  # no time of its own: the gateway stamps "now"
                payload={"i": i},
            )
        )
        lat.append(clock() - a)
        failures += out is None
    seconds = clock() - t0
    print(json.dumps({"seconds": seconds, "failures": failures, "lat": lat}), flush=True)
    gw.close()


_FLOOR_APPEND = (
    "WITH e AS (INSERT INTO events (session_key, session_id, agent_id, kind, actor_type, occurred_at, summary, body)"
    " VALUES (%s, NULL, %s, 'human_direct_message', 'human', %s, %s, %s) RETURNING sequence)"
    " INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) SELECT %s, %s, e.sequence, %s FROM e"
    " ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,"
    " updated_at = excluded.updated_at"
)


def floor_worker(url: str, events: int, sessions: int, worker_id: int) -> None:
    """One raw psycopg process: the event row and the head upsert, one durable commit per append."""
    import psycopg

    keys = [_key(f"bench-s{i}") for i in range(sessions)]
    conn = psycopg.connect(url, autocommit=True)
    print("ready", flush=True)
    sys.stdin.readline()
    lat: list[float] = []
    clock = time.perf_counter
    t0 = clock()
    for i in range(events):
        a = clock()
        key = keys[(i + worker_id) % sessions]
        now = int(time.time() * 1000)
        body = json.dumps({"payload": {"i": i}})
        conn.execute(_FLOOR_APPEND, (key, AGENT, now, f"bench event {worker_id}.{i}", body, key, AGENT, now))
        lat.append(clock() - a)
    seconds = clock() - t0
    print(json.dumps({"seconds": seconds, "failures": 0, "lat": lat}), flush=True)
    conn.close()


def _setup(url: str, sessions: int, watchers: int) -> None:
    from sessionwatch import Gateway

    with Gateway.open(url, timers=False) as gw:
        for i in range(sessions):
            for j in range(watchers):
                gw.watch(_key(f"bench-w{j}"), _key(f"bench-s{i}"))


def _run(url: str, procs: int, events: int, sessions: int, role: str = "--worker") -> dict[str, Any]:
    env = {**child_env(), "PYTHONUNBUFFERED": "1"}
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.pg_scaling",
                role,
                url,
                "--events",
                str(events),
                "--sessions",
                str(sessions),
                "--worker-id",
                str(k),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(procs)
    ]
    for c in children:
        assert c.stdout is not None and c.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for c in children:
        assert c.stdin is not None
        c.stdin.write("go\n")
        c.stdin.flush()
    reports = []
    for c in children:
        assert c.stdout is not None
        reports.append(json.loads(c.stdout.readline()))
    wall = time.perf_counter() - t0
    for c in children:
        c.wait(60)
    lat = [x for r in reports for x in r["lat"]]
    return {
        "wall": wall,
        "failures": sum(r["failures"] for r in reports),
        "lat": lat,
        "slowest_process_seconds": max(r["seconds"] for r in reports),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--store",
        default=os.environ.get("SESSIONWATCH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a server URL; a fresh database is created (and dropped) per run",
    )
    p.add_argument("--procs", default="1,4,8")
    p.add_argument("--events", type=int, default=600, help="events per process")
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--watchers", default="0,10", help="watchers on every session, per scenario")
    p.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default=None,
        help="override synchronous_commit for the gateways' sessions (default: the server's)",
    )
    p.add_argument("--no-floor", action="store_true", help="skip the raw psycopg floor runs")
    p.add_argument("--rounds", type=int, default=3, help="floor and ours, alternating, per scenario (medians)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--floor-worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker, a.events, a.sessions, a.worker_id)
        return
    if a.floor_worker:
        floor_worker(a.floor_worker, a.events, a.sessions, a.worker_id)
        return

    server = urlsplit(a.store)
    print(
        json.dumps(
            {
                "op": "run",
                "meta": True,
                "backend": "postgresql",
                "server": server.netloc.split("@")[-1],
                "cpus": os.cpu_count(),
                "synchronous_commit": a.synchronous_commit or "server default",
            }
        ),
        flush=True,
    )
    for watchers in [int(w) for w in a.watchers.split(",")]:
        base: float | None = None
        for procs in [int(n) for n in a.procs.split(",")]:
            # Floor and ours alternate, round after round, so a burst of other work on a shared machine
            # hits both alike; the row reports medians and the median of the per-round ratios.
            floors: list[float] = []
            rounds: list[dict[str, Any]] = []
            for _ in range(a.rounds):
                if not a.no_floor:
                    floors.append(_floor_run(a, procs))
                rounds.append(_record_run(a, procs, watchers))
            n = procs * a.events
            per_sec = statistics.median(r["per_sec"] for r in rounds)
            base = base or per_sec
            lat = sorted(x for r in rounds for x in r["lat"])
            floor = statistics.median(floors) if floors else None
            ratios = [r["per_sec"] / f for r, f in zip(rounds, floors, strict=False)]
            print(
                json.dumps(
                    {
                        "op": f"pg_record_w{watchers}_procs{procs}",
                        "n": n,
                        "seconds": round(statistics.median(r["wall"] for r in rounds), 6),
                        "per_sec": round(per_sec, 1),
                        "procs": procs,
                        "watchers": watchers,
                        "sessions": a.sessions,
                        "rounds": a.rounds,
                        "ratio_vs_1": round(per_sec / base, 2),
                        **(
                            {}
                            if floor is None
                            else {
                                "floor_per_sec": round(floor, 1),
                                "ratio_vs_floor": round(statistics.median(ratios), 3),
                                "ratio_vs_floor_rounds": [round(x, 3) for x in ratios],
                            }
                        ),
                        "per_process_per_sec": round(per_sec / procs, 1),
                        "failures": sum(r["failures"] for r in rounds),
                        "rows_after": rounds[-1]["rows"],
                        "dense": all(r["dense"] for r in rounds),
                        **_pct(lat),
                    }
                ),
                flush=True,
            )


def _record_run(a: argparse.Namespace, procs: int, watchers: int) -> dict[str, Any]:
    """One round of ``procs`` gateway processes recording on a fresh database: events/s, latencies, and
    whether the log holds exactly the events recorded, numbered without gaps."""
    import psycopg

    name = f"sw_scaling_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(a.store, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _db_url(a.store, name, a.synchronous_commit)
        _setup(url, a.sessions, watchers)
        res = _run(url, procs, a.events, a.sessions)
        with psycopg.connect(url) as conn:
            rows, top = conn.execute("SELECT count(*), max(sequence) FROM events").fetchone()  # type: ignore[misc]
    finally:
        with psycopg.connect(a.store, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    n = procs * a.events
    return {
        "per_sec": n / res["wall"],
        "wall": res["wall"],
        "lat": res["lat"],
        "failures": res["failures"],
        "rows": rows,
        "dense": rows == n and top == n,
    }


def _floor_run(a: argparse.Namespace, procs: int) -> float:
    """The raw psycopg floor with ``procs`` processes on a fresh migrated database; prints its row."""
    import psycopg

    name = f"sw_floor_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(a.store, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _db_url(a.store, name, a.synchronous_commit)
        _setup(url, a.sessions, 0)  # the schema, nothing else
        res = _run(url, procs, a.events, a.sessions, role="--floor-worker")
    finally:
        with psycopg.connect(a.store, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    n = procs * a.events
    per_sec = n / res["wall"]
    print(
        json.dumps(
            {
                "op": f"pg_floor_procs{procs}",
                "n": n,
                "seconds": round(res["wall"], 6),
                "per_sec": round(per_sec, 1),
                "procs": procs,
                **_pct(res["lat"]),
            }
        ),
        flush=True,
    )
    return round(per_sec, 1)


if __name__ == "__main__":
    main()
