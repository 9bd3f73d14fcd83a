"""What the metrics observer (the hooks behind ``GET /metrics``) costs an engine call, in process.

    python -m benchmarks.metrics_overhead [--calls 2000] [--rounds 9] [--quick]

Two gateways on two fresh SQLite stores with the same seed (http_load.py's: 50 watched targets with
ten human messages each): one with no observer (the engine's default, which does nothing), one with
the HTTP face's Prometheus observer attached (store operations timed, notices counted), as every HTTP
gateway runs. Each round times ``--calls`` calls of each operation on both gateways, alternating which
goes first, so load from other work falls on both alike. Operations: ``session_status`` with
``changesSince`` and ``sessions_send`` (tool calls) and ``inbound`` (a person's message into a watched
session: a recording, which the observer counts). Prints one JSON line per (operation, observer) with
the median over the rounds of the mean CPU µs per call (``cpu_us``; ``wall_us`` beside it), and a final
``ratio`` line: with / without, by CPU time.

In process nothing else (HTTP parsing, the event loop) hides the observer's cost, so this is its
upper bound as a share of a request; over HTTP the same cost is a small part of the server's work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks import http_load
from sessionwatch import Gateway
from sessionwatch.http.metrics import PrometheusObserver


def operations(gw: Any, heads: dict[str, int]) -> dict[str, Callable[[int], Any]]:
    return {
        "session_status_changes_since": lambda i: gw.call_tool(
            "session_status", http_load.status_args(i, heads), caller=http_load.CALLER
        ),
        "sessions_send": lambda i: gw.call_tool("sessions_send", http_load.send_args(i), caller=http_load.CALLER),
        "inbound": lambda i: gw.inbound(http_load.target(i), f"person says {i}", channel="web", human_id="ana"),
    }


def timed_batch(call: Callable[[int], Any], start: int, calls: int) -> tuple[float, float]:
    """Mean µs per call over ``calls`` calls (indices from ``start``, so every call is a new one): wall time
    and this thread's CPU time. CPU time leaves out the time other work on the machine takes the core away,
    so it is the steadier of the two on a shared machine (the calls run on this thread only)."""
    wall, cpu = time.perf_counter, time.thread_time
    w0, c0 = wall(), cpu()
    for i in range(start, start + calls):
        call(i)
    return (wall() - w0) / calls * 1e6, (cpu() - c0) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=2000, help="calls per operation, gateway and round")
    p.add_argument("--rounds", type=int, default=9, help="alternating rounds (the figure is their median)")
    p.add_argument("--quick", action="store_true", help="500 calls, 5 rounds")
    a = p.parse_args(argv)
    if a.quick:
        a.calls, a.rounds = 500, 5
    with tempfile.TemporaryDirectory(prefix="sw-metrics-bench-") as tmp:
        plain = Gateway.open(f"sqlite:///{tmp}/plain.db", timers=False)
        observed = Gateway.open(f"sqlite:///{tmp}/observed.db", timers=False)
        try:
            observed.set_observer(PrometheusObserver(CollectorRegistry(auto_describe=False)))
            gateways = {"off": plain, "on": observed}
            heads = {side: http_load.seed(gw) for side, gw in gateways.items()}
            ops = {side: operations(gw, heads[side]) for side, gw in gateways.items()}
            for calls in ops.values():  # warm caches and code paths (reads only)
                timed_batch(calls["session_status_changes_since"], 0, min(500, a.calls))
            us: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for r in range(a.rounds):
                order = ("off", "on") if r % 2 == 0 else ("on", "off")
                for side, gw in gateways.items():  # every round reads the last five events, not a growing tail
                    heads[side].update({key: gw.state_version(key) for key in heads[side]})
                for op in ops["off"]:
                    for side in order:
                        us.setdefault((op, side), []).append(timed_batch(ops[side][op], r * a.calls, a.calls))
        finally:
            plain.close()
            observed.close()
    ratio: dict[str, float] = {}
    for op in ops["off"]:
        cpu: dict[str, float] = {}
        for side in ("off", "on"):
            cpu[side] = statistics.median(c for _, c in us[(op, side)])
            wall = statistics.median(w for w, _ in us[(op, side)])
            print(
                json.dumps(
                    {
                        "op": op,
                        "observer": side,
                        "n": a.calls,
                        "rounds": a.rounds,
                        "cpu_us": round(cpu[side], 1),
                        "wall_us": round(wall, 1),
                        "rounds_cpu_us": [round(c, 1) for _, c in us[(op, side)]],
                    }
                ),
                flush=True,
            )
        ratio[op] = round(cpu["on"] / cpu["off"], 3)
    print(json.dumps({"op": "ratio", "meta": True, "observed_over_plain": ratio}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
