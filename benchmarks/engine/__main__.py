"""``python -m benchmarks.engine``: orchestrates the scenario phases, each in a fresh process."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import child_env


def _emit(op: str, n: int | None = None, seconds: float | None = None, **extra: Any) -> None:
    line: dict[str, Any] = {"op": op}
    if n is not None and seconds is not None:
        line.update(n=n, seconds=round(seconds, 6), per_sec=round(n / seconds, 1) if seconds else None)
    line.update(extra)
    print(json.dumps(line), flush=True)


def _phase_main(phase: str, url: str, args: dict[str, Any]) -> None:
    from benchmarks.engine.hook_latency import hook_latency
    from benchmarks.engine.mcp_start import mcp_start
    from benchmarks.engine.scenarios import PHASES

    {**PHASES, "hook": hook_latency, "mcp": mcp_start}[phase](url, args, _emit)


@contextmanager
def _store(base: str | None, tmp: str, label: str) -> Iterator[str]:
    """A fresh store per scenario: a new SQLite file, or a new PostgreSQL database."""
    if base is None or not base.startswith("postgres"):
        d = tempfile.mkdtemp(prefix=f"sw-bench-{label}-", dir=tmp)
        try:
            yield f"sqlite:///{d}/state.db"
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return
    import uuid

    import psycopg

    name = f"sw_bench_{label.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    admin = base.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(phase: str, url: str, args: dict[str, Any]) -> None:
    cmd = [sys.executable, "-m", "benchmarks.engine", "--phase", phase, "--url", url, "--args", json.dumps(args)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=child_env())
    sys.stdout.write(proc.stdout)
    sys.stdout.flush()
    if proc.returncode != 0:
        raise SystemExit(f"phase {phase} failed with exit code {proc.returncode}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.engine", description=__doc__)
    p.add_argument("--quick", action="store_true", help="10x smaller smoke run")
    p.add_argument("--only", help="comma list of: info,raw,append,changes,ack,sweep,prune,hook,mcp")
    p.add_argument(
        "--store", help="postgresql://user@host:port/anydb to run against PostgreSQL (a fresh database per scenario)"
    )
    p.add_argument("--tmp", default=None, help="folder for the SQLite files (default: system temp)")
    p.add_argument("--no-all", action="store_true", help="skip the fan-out-to-every-session append runs")
    p.add_argument("--growth", action="store_true", help="the growth benchmark (benchmarks/engine/growth.py) instead")
    p.add_argument("--small", action="store_true", help="with --growth: sizes / 10")
    p.add_argument(
        "--postgres",
        nargs="?",
        const="postgresql://postgres@127.0.0.1:5432/test",
        default=None,
        metavar="DSN",
        help="with --growth: on PostgreSQL (a throwaway schema per store in DSN's "
        "database; default postgresql://postgres@127.0.0.1:5432/test), with round "
        "trips per call and a bare SELECT 1 next to every size",
    )
    p.add_argument(
        "--growth-limit",
        type=float,
        default=None,
        help="with --growth: exit 1 when an operation grows more than this per 10x",
    )
    p.add_argument(
        "--growth-runs",
        type=int,
        default=1,
        metavar="N",
        help="with --growth: measure every size N times (fresh stores, whole rounds) and report the medians",
    )
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--args", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.phase:
        _phase_main(a.phase, a.url, json.loads(a.args))
        return
    if a.growth:
        from benchmarks.engine.growth import main as growth_main

        raise SystemExit(
            growth_main(
                _emit,
                small=a.small,
                tmp=a.tmp,
                only=a.only,
                limit=a.growth_limit,
                postgres=a.postgres,
                runs=max(1, a.growth_runs),
            )
        )
    scale = (lambda n: max(1, n // 10)) if a.quick else (lambda n: n)
    only = set(a.only.split(",")) if a.only else None
    want = lambda name: only is None or name in only  # noqa: E731
    tmp = a.tmp or tempfile.gettempdir()
    n = scale(20000)
    started = time.perf_counter()
    backend = "postgresql" if a.store and a.store.startswith("postgres") else "sqlite"
    _emit("run", meta=True, backend=backend, quick=a.quick, pid=os.getpid())
    if want("info"):
        with _store(a.store, tmp, "info") as url:
            _run("info", url, {})
    if want("raw") and backend == "sqlite":
        with _store(None, tmp, "raw") as url:
            _run("raw", url, {"n": n, "sessions": 100})
    if want("append"):
        plan = [(0, "target"), (10, "target"), (100, "target")]
        if not a.no_all:
            plan += [(10, "all"), (100, "all")]
        for w, mode in plan:
            with _store(a.store, tmp, f"append-w{w}-{mode}") as url:
                _run("append", url, {"n": n, "watchers": w, "mode": mode, "sessions": 100})
    if want("changes"):
        with _store(a.store, tmp, "changes") as url:
            _run("changes", url, {"rows": scale(50000), "calls": scale(1000)})
    if want("ack"):
        with _store(a.store, tmp, "ack") as url:
            _run("ack", url, {"targets": scale(1000)})
    if want("sweep"):
        with _store(a.store, tmp, "sweep") as url:
            _run("sweep-setup", url, {"pending": scale(1000), "targets": scale(100)})
            _run("sweep-run", url, {"pending": scale(1000)})
    if want("prune"):
        with _store(a.store, tmp, "prune") as url:
            _run("prune", url, {"rows": 6000 if a.quick else 60000, "sessions": 100, "calls": 20})
    if want("hook"):
        with _store(a.store, tmp, "hook") as url:
            _run("hook", url, {"runs": 10 if a.quick else 40})
    if want("mcp"):
        with _store(a.store, tmp, "mcp") as url:
            _run("mcp", url, {"runs": 5 if a.quick else 20})
    print(f"# done in {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
