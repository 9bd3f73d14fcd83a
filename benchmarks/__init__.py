"""sessionwatch's benchmarks: every one lives in this package and runs from a clone's root folder.

    python -m benchmarks                 # the list below
    python -m benchmarks NAME [OPTIONS]  # the same as python -m benchmarks.NAME [OPTIONS]

Every program prints JSON lines (one measurement per line, ``"meta": true`` for setup lines) and takes
``--help``. The figures and what they mean are in docs/benchmarks.md, which ``report`` rewrites. Nothing
in the ``sessionwatch`` package imports this one (``lint-imports`` checks it), so none of it ships in the
wheel.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The clone's root folder, where ``python -m benchmarks...`` finds this package."""

PEER_HARNESS = Path(__file__).resolve().parent / "peer" / "openclaw" / "run.sh"
"""The peer harness: OpenClaw's published implementation through the same scenarios (``compare`` runs it)."""

# name -> what it measures; `python -m benchmarks` prints this, and tests/test_examples_and_bench.py checks
# that every module of the package is listed, so a new benchmark cannot hide.
BENCHMARKS: dict[str, str] = {
    "engine": "the engine scenarios (append, changesSince, ack, sweep, prune, hook start, MCP start); "
    "--growth: per-call cost as the store grows (--postgres: on PostgreSQL, with round trips)",
    "compare": "the engine scenarios next to the peer (OpenClaw's own code, peer/openclaw/run.sh): ratio table",
    "http_load": "HTTP tool calls per second and latency with 100 SSE subscribers",
    "upstream_bench": "the upstream monitor's tick over 1,000 unchanged transcripts, its scan of new bytes",
    "pg_vs_sqlite": "the engine scenarios on PostgreSQL and on SQLite, one table",
    "pg_scaling": "recording throughput of 1, 2 and 4 gateway processes on one PostgreSQL database",
    "dashboard_overhead": "what an open dashboard and 100 log-stream followers cost the gateway",
    "metrics_overhead": "what the metrics observer behind /metrics costs an engine call",
    "report": "runs all of the above but the growth benchmark and rewrites the generated part of docs/benchmarks.md",
}


def child_env() -> dict[str, str]:
    """This environment with the clone's root on PYTHONPATH, so a child ``python -m benchmarks...`` finds the
    package whatever folder the child runs in (and ``--tmp`` or ``--out`` paths keep meaning the same)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env
