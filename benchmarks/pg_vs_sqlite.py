"""The benchmark scenarios on SQLite and on PostgreSQL in one run; prints how much slower PostgreSQL is.

    python -m benchmarks.pg_vs_sqlite [--store postgresql://postgres@127.0.0.1:5432/postgres] [--quick]

Slowdown = SQLite throughput / PostgreSQL throughput (for latency-only ops, PostgreSQL p50 / SQLite p50).
Writes both raw outputs (``pg_vs_sqlite.sqlite.jsonl``, ``pg_vs_sqlite.postgresql.jsonl``) and the Markdown
table under --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import ROOT, child_env

SKIP = {"raw_insert_baseline"}


def run(extra: list[str]) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.engine", *extra],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=child_env(),
        check=True,
    )
    return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]


def table(sqlite_lines: list[dict], pg_lines: list[dict]) -> str:
    """The Markdown table: one row per scenario both runs measured (benchmarks/report.py renders it too)."""
    sqlite = {d["op"]: d for d in sqlite_lines if not d.get("meta")}
    pg = {d["op"]: d for d in pg_lines if not d.get("meta")}
    rows = ["| op | SQLite per_sec | PostgreSQL per_sec | PostgreSQL slower by | ≤ 4× |", "|---|---:|---:|---:|---|"]
    for op, s in sqlite.items():
        if op in SKIP or op not in pg or "per_sec" not in s:
            continue
        p = pg[op]
        slower = s["per_sec"] / p["per_sec"] if p.get("per_sec") else None
        mark = "" if slower is None else ("yes" if slower <= 4 else "**no**")
        rows.append(
            f"| `{op}` | {s['per_sec']} | {p.get('per_sec', '')} | "
            f"{'' if slower is None else f'{slower:.1f}×'} | {mark} |"
        )
    return "\n".join(rows)


def round_trip(store: str, n: int = 2000) -> dict:
    """The floor under every PostgreSQL call: a bare ``SELECT 1`` from psycopg to the server, p50 over n."""
    import psycopg

    with psycopg.connect(store, autocommit=True) as conn:
        for _ in range(100):
            conn.execute("SELECT 1")
        lat = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            conn.execute("SELECT 1").fetchone()
            lat.append(time.perf_counter_ns() - t0)
    lat.sort()
    return {
        "op": "select_1_round_trip",
        "meta": True,
        "n": n,
        "p50_us": round(lat[n // 2] / 1000, 1),
        "p99_us": round(lat[int(n * 0.99)] / 1000, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    a = ap.parse_args()
    extra = ["--quick"] if a.quick else []
    sqlite = run(extra)
    pg = run([*extra, "--store", a.store])
    pg.append(round_trip(a.store))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pg_vs_sqlite.sqlite.jsonl").write_text("".join(json.dumps(d) + "\n" for d in sqlite))
    (out / "pg_vs_sqlite.postgresql.jsonl").write_text("".join(json.dumps(d) + "\n" for d in pg))
    md = table(sqlite, pg)
    (out / "pg_vs_sqlite.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
