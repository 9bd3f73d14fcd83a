"""MCP start-up: from starting ``sessionwatch mcp`` (stdio) to its answers to a host's first requests,
Python start-up included. A host does not wait long for a server's tools, so this is whether the
model's first request has them. Budget: ``tools/list`` answered within 300 ms.

Two openings, as the pinned hosts send them: Codex (``initialize``, ``notifications/initialized``,
``tools/list``) and Claude Code (``server/discover`` twice, a ``subscriptions/listen`` for list changes,
``resources/list``, ``tools/list``). Each is run with the quick start (the opening answered without the
MCP SDK, which loads only for a request the table does not cover) and with
``SESSIONWATCH_MCP_QUICKSTART=0`` (the SDK loads at once and answers everything, as before), interleaved,
each start beside one run of ``python -c pass`` (the floor, per host: a busy machine slows both alike),
with the ratios at p50 and p95. Each start also reports its CPU time, from start to exit once the client
has closed its end after the opening: what a host session that never calls a sessionwatch tool costs.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.engine.hook_latency import _argv, _stats

BUDGET_MS = 300.0
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
OPENINGS: dict[str, list[dict[str, Any]]] = {
    "codex": [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "codex-mcp-client", "version": "0.171.0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ],
    "claude-code": [
        {"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover", "params": {"_meta": META}},
        {
            "jsonrpc": "2.0",
            "id": "listen:0",
            "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"toolsListChanged": True, "resourcesListChanged": True}},
        },
        {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
    ],
}
ANSWERS = {host: sum(1 for m in opening if "id" in m) for host, opening in OPENINGS.items()}  # a listen: its ack


def _open(url: str, host: str, quick: bool) -> tuple[float, float, float]:
    """(ms to the first answer, ms to the tools/list answer) from the process start, and the process's CPU
    ms from start to exit (the client closes its end once the whole opening is answered)."""
    opening = OPENINGS[host]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "SESSIONWATCH_MCP_QUICKSTART": "1" if quick else "0"}
    begun = time.perf_counter()
    proc = subprocess.Popen(
        [*_argv(), "--store", url, "mcp", "--session", "agent:main:main"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in opening))
    proc.stdin.flush()
    first = listed = 0.0
    for _ in range(ANSWERS[host]):
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("sessionwatch mcp exited before answering its opening")
        took = (time.perf_counter() - begun) * 1000
        answer = json.loads(line)
        first = first or took
        if answer.get("id") == 1:
            if "result" not in answer:
                raise SystemExit(f"tools/list failed: {answer}")
            listed = took
    proc.stdin.close()
    proc.wait(30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return first, listed, cpu


def _floor() -> float:
    begun = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - begun) * 1000


def mcp_start(url: str, args: dict[str, Any], emit: Callable[..., None]) -> None:
    from sessionwatch import Gateway

    runs = int(args.get("runs", 20))
    with Gateway.open(url, timers=False) as gw:
        gw.put_session("agent:main:main")
    every: list[float] = []
    for host in OPENINGS:
        got: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
        floor: list[float] = []  # one python -c pass run beside each start, quick or not
        for _ in range(runs):
            for quick in (True, False):
                floor.append(_floor())
                got[quick].append(_open(url, host, quick))
        every += floor
        base = _stats(floor)
        for quick in (True, False):
            listed = _stats([t for _, t, _ in got[quick]])
            emit(
                "mcp-start",
                host=host,
                quick_start=quick,
                budget_ms=BUDGET_MS,
                first_answer_p50_ms=_stats([f for f, _, _ in got[quick]])["p50_ms"],
                cpu_p50_ms=_stats([c for _, _, c in got[quick]])["p50_ms"],
                tools_listed=listed,
                within=listed["p95_ms"] <= BUDGET_MS,
                floor_p50_ms=base["p50_ms"],
                floor_p95_ms=base["p95_ms"],
                ratio_to_floor_p50=round(listed["p50_ms"] / max(base["p50_ms"], 0.1), 2),
                ratio_to_floor_p95=round(listed["p95_ms"] / max(base["p95_ms"], 0.1), 2),
            )
        emit(
            "mcp-start-speedup",
            host=host,
            p95_before_over_after=round(
                _stats([t for _, t, _ in got[False]])["p95_ms"] / _stats([t for _, t, _ in got[True]])["p95_ms"], 1
            ),
            cpu_p50_before_over_after=round(
                _stats([c for _, _, c in got[False]])["p50_ms"] / _stats([c for _, _, c in got[True]])["p50_ms"], 1
            ),
        )
    emit("mcp-start-floor", case="python -c pass, interleaved (all starts)", **_stats(every))
