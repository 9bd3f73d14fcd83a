"""The benchmark scenarios on SQLite and on PostgreSQL in one run; prints how much slower PostgreSQL is.

    python benchmarks/pg_vs_sqlite.py [--store postgresql://postgres@127.0.0.1:5432/postgres] [--quick]

Slowdown = SQLite throughput / PostgreSQL throughput (for latency-only ops, PostgreSQL p50 / SQLite p50).
Writes both raw outputs and the Markdown table under --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"raw_insert_baseline"}


def run(extra: list[str]) -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-m", "sessionwatch.bench", *extra], stdout=subprocess.PIPE, text=True,
                          cwd=ROOT, check=True)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return {d["op"]: d for d in lines if not d.get("meta")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    a = ap.parse_args()
    extra = ["--quick"] if a.quick else []
    sqlite = run(extra)
    pg = run([*extra, "--store", a.store])
    rows = ["| op | SQLite per_sec | PostgreSQL per_sec | PostgreSQL slower by | ≤ 4× |", "|---|---:|---:|---:|---|"]
    for op, s in sqlite.items():
        if op in SKIP or op not in pg:
            continue
        p = pg[op]
        slower = s["per_sec"] / p["per_sec"] if p.get("per_sec") else None
        mark = "" if slower is None else ("yes" if slower <= 4 else "**no**")
        rows.append(f"| `{op}` | {s['per_sec']} | {p['per_sec']} | "
                    f"{'' if slower is None else f'{slower:.1f}×'} | {mark} |")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pg_vs_sqlite.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
