"""MCP start-up: from starting ``sessionwatch mcp`` (stdio) to its answers to a host's first requests,
Python start-up included. A host does not wait long for a server's tools, so this is whether the
model's first request has them. Budget: ``tools/list`` answered within 300 ms.

Two openings, as the pinned hosts send them: Codex (``initialize``, ``notifications/initialized``,
``tools/list``) and Claude Code (``server/discover``, then ``tools/list``). Each is run with the quick
start (the handshake answered while the MCP SDK loads) and with ``SESSIONWATCH_MCP_QUICKSTART=0`` (the
SDK answers everything, as before), interleaved, each start beside one run of ``python -c pass`` (the
floor, per host: a busy machine slows both alike), with the ratios at p50 and p95.
"""

from __future__ import annotations

import json
import os
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
        {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
    ],
}


def _open(url: str, opening: list[dict[str, Any]], quick: bool) -> tuple[float, float]:
    """(ms to the first answer, ms to the tools/list answer) from the process start."""
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
    while not listed:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("sessionwatch mcp exited before listing its tools")
        took = (time.perf_counter() - begun) * 1000
        answer = json.loads(line)
        first = first or took
        if answer.get("id") == 1:
            if "result" not in answer:
                raise SystemExit(f"tools/list failed: {answer}")
            listed = took
    proc.stdin.close()
    proc.wait(30)
    return first, listed


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
    for host, opening in OPENINGS.items():
        got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        floor: list[float] = []  # one python -c pass run beside each start, quick or not
        for _ in range(runs):
            for quick in (True, False):
                floor.append(_floor())
                got[quick].append(_open(url, opening, quick))
        every += floor
        base = _stats(floor)
        for quick in (True, False):
            listed = _stats([t for _, t in got[quick]])
            emit(
                "mcp-start",
                host=host,
                quick_start=quick,
                budget_ms=BUDGET_MS,
                first_answer_p50_ms=_stats([f for f, _ in got[quick]])["p50_ms"],
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
                _stats([t for _, t in got[False]])["p95_ms"] / _stats([t for _, t in got[True]])["p95_ms"], 1
            ),
        )
    emit("mcp-start-floor", case="python -c pass, interleaved (all starts)", **_stats(every))
