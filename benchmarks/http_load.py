"""HTTP gateway load benchmark: tool calls through HTTP vs the in-process Python API.

    python -m benchmarks.http_load [--requests 20000] [--clients 2] [--connections 4] [--subscribers 100]

Starts a real gateway (``python -m sessionwatch.http``, access log off) on a free 127.0.0.1 port with
a fresh SQLite store, connects ``--subscribers`` SSE wake streams and keeps them open during the HTTP
runs, then drives ``session_status`` with ``changesSince`` and ``sessions_send`` from ``--clients``
load-generator processes, each with ``--connections`` keep-alive connections speaking raw HTTP/1.1
(closed loop, one request in flight per connection). The same two operations then run in-process
against ``sessionwatch.Gateway``. Prints one JSON object per line:
``{op, n, seconds, per_sec, p50_us, p99_us, max_us, ...}`` and a final ``ratio`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import httpx

from sessionwatch import Gateway

HOST = "127.0.0.1"
CALLER = "agent:main:main"
TARGETS = 50
EVENTS_PER_TARGET = 10
_CONTENT_LENGTH = re.compile(rb"content-length:\s*(\d+)", re.I)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def percentiles(lat_ns: list[int] | array, seconds: float, op: str, **extra: Any) -> dict[str, Any]:
    ordered = sorted(lat_ns)
    n = len(ordered)

    def pct(p: float) -> float:
        return round(ordered[min(n - 1, int(p * n))] / 1000, 1) if n else 0.0

    return {
        "op": op,
        "n": n,
        "seconds": round(seconds, 4),
        "per_sec": round(n / seconds, 1) if seconds else 0.0,
        "p50_us": pct(0.50),
        "p99_us": pct(0.99),
        "max_us": round(ordered[-1] / 1000, 1) if n else 0.0,
        **extra,
    }


# -- workload ------------------------------------------------------------------------------------
def target(i: int) -> str:
    return f"agent:main:worker-{i % TARGETS}"


def seed(gw: Any) -> dict[str, int]:
    """The same data for both runs: a caller and TARGETS sessions with a few human events each."""
    gw.put_session(CALLER)
    heads = {}
    for i in range(TARGETS):
        key = target(i)
        gw.put_session(key)
        gw.watch(CALLER, key)  # a person's message is logged only for a watched (or spawned) session
        for j in range(EVENTS_PER_TARGET):
            gw.inbound(key, f"human message {j}", channel="web", human_id="ana")
        heads[key] = gw.state_version(key)
        assert heads[key] >= 5, f"seeding {key} recorded nothing"
    return heads


def status_args(i: int, heads: dict[str, int]) -> dict[str, Any]:
    key = target(i)
    return {"sessionKey": key, "changesSince": heads[key] - 5}  # five typed events per answer


def send_args(i: int) -> dict[str, Any]:
    return {"sessionKey": target(i), "message": f"delegated task {i}"}


def raw_request(name: str, args: dict[str, Any], port: int) -> bytes:
    body = json.dumps(args, separators=(",", ":")).encode()
    # Host names this server with its port: the browser guard refuses any other (docs/security.md).
    return (
        f"POST /v1/tools/{name} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        f"X-Session-Key: {CALLER}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


# -- load generator (child processes) --------------------------------------------------------------
async def _connection(port: int, requests: list[bytes], lat: array, errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        for req in requests:
            t0 = time.perf_counter_ns()
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            match = _CONTENT_LENGTH.search(head)
            if match:
                await reader.readexactly(int(match.group(1)))
            lat.append(time.perf_counter_ns() - t0)
            if head[9:12] != b"200":
                errors[0] += 1
    finally:
        writer.close()


async def _generate(port: int, per_connection: list[list[bytes]]) -> tuple[array, int, float, float]:
    lat: array = array("q")
    errors = [0]
    start = time.perf_counter()
    await asyncio.gather(*(_connection(port, reqs, lat, errors) for reqs in per_connection))
    return lat, errors[0], start, time.perf_counter()


def _load_process(port: int, per_connection: list[list[bytes]], go: Any, out: Any, limit: float) -> None:
    try:
        try:
            import uvloop  # the load generator should cost as little CPU as possible

            uvloop.install()
        except ImportError:
            pass
        go.wait()
        # One deadline for the whole run (not one per request, which would cost the generator CPU): a
        # response that never comes fails the run instead of blocking it.
        lat, errors, start, end = asyncio.run(asyncio.wait_for(_generate(port, per_connection), limit))
        out.put((lat.tobytes(), errors, start, end))
    except BaseException as exc:
        out.put(("error", f"{type(exc).__name__}: {exc}"))
        raise


def run_http(port: int, op: str, requests: list[bytes], clients: int, connections: int, **extra: Any) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    go, out = ctx.Event(), ctx.Queue()
    slots = clients * connections
    shares = [requests[i::slots] for i in range(slots)]
    # Generous (at least 100 calls/s), but bounded: a stalled server or connection fails within it.
    limit = max(60.0, len(requests) / 100)
    procs = [
        ctx.Process(target=_load_process, args=(port, shares[c * connections : (c + 1) * connections], go, out, limit))
        for c in range(clients)
    ]
    for p in procs:
        p.start()
    time.sleep(0.3)  # let the generators import and connect-ready
    go.set()
    try:
        results = _collect(out, procs, op, limit + 10)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    lat: array = array("q")
    for raw, _, _, _ in results:
        lat.frombytes(raw)
    errors = sum(r[1] for r in results)
    seconds = max(r[3] for r in results) - min(r[2] for r in results)
    return percentiles(lat, seconds, op, errors=errors, clients=clients, connections=slots, **extra)


def _collect(out: Any, procs: list[Any], op: str, limit: float) -> list[Any]:
    """Each generator's result; fails at once, naming the cause, when one reports an error or dies."""
    deadline = time.monotonic() + limit
    results: list[Any] = []
    while len(results) < len(procs):
        try:
            item = out.get(timeout=1)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"{op}: a load-generator process died (exit code {dead[0]})") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{op}: the load generators did not finish within {limit:.0f} s") from None
            continue
        if item[0] == "error":
            raise RuntimeError(f"{op}: a load generator failed: {item[1]}")
        results.append(item)
    return results


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used (Linux /proc); None elsewhere. Per request, this is
    the server's own cost, far less disturbed by other work on a shared machine than throughput."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(pid: int, fn: Any, *args: Any, **kw: Any) -> dict[str, Any]:
    before = cpu_seconds(pid)
    line: dict[str, Any] = fn(*args, **kw)
    after = cpu_seconds(pid)
    if before is not None and after is not None and line["n"]:
        line["server_cpu_us_per_req"] = round((after - before) / line["n"] * 1e6, 1)
    return line


# -- SSE subscribers (one child process) -----------------------------------------------------------
async def _subscriber(port: int, key: str, ready: asyncio.Event, counter: list[int], total: int) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(f"GET /v1/stream?sessionKey={key} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    counter[0] += 1
    if counter[0] == total:
        ready.set()
    while await reader.read(65536):
        pass


def _subscribers_process(port: int, n: int, ready_flag: Any) -> None:
    async def main() -> None:
        ready, counter = asyncio.Event(), [0]
        tasks = [asyncio.create_task(_subscriber(port, f"agent:main:watcher-{i}", ready, counter, n)) for i in range(n)]
        await ready.wait()
        ready_flag.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


# -- orchestration --------------------------------------------------------------------------------
def start_gateway(store_url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SESSIONWATCH_ACCESS_LOG": "0"}
    env.pop("SESSIONWATCH_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessionwatch.http",
            "--port",
            str(port),
            "--store",
            store_url,
            "--no-monitor",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://{HOST}:{port}/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"gateway did not start: {log.read_text()[-2000:]}")


def http_runs(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    port = free_port()
    server = start_gateway(args.store or f"sqlite:///{workdir}/http.db", port, workdir / "gateway.log")
    subs: mp.process.BaseProcess | None = None
    lines: list[dict[str, Any]] = []
    try:
        from sessionwatch.client import GatewayClient

        with GatewayClient(f"http://{HOST}:{port}") as client:
            heads = seed(client)
        if args.subscribers:
            ctx = mp.get_context("fork")
            ready = ctx.Event()
            subs = ctx.Process(target=_subscribers_process, args=(port, args.subscribers, ready), daemon=True)
            subs.start()
            assert ready.wait(30), "SSE subscribers did not connect"
        streams = httpx.get(f"http://{HOST}:{port}/v1/health").json().get("streams")
        extra = {"sse_subscribers": streams, "transport": "http"}
        n = args.requests
        status_reqs = [raw_request("session_status", status_args(i, heads), port) for i in range(n)]
        send_reqs = [raw_request("sessions_send", send_args(i), port) for i in range(n)]
        run_http(port, "warmup", status_reqs[: min(2000, n)], args.clients, args.connections)
        lines.append(
            measured(
                server.pid,
                run_http,
                port,
                "http_session_status_changes_since",
                status_reqs,
                args.clients,
                args.connections,
                **extra,
            )
        )
        lines.append(
            measured(
                server.pid, run_http, port, "http_sessions_send", send_reqs, args.clients, args.connections, **extra
            )
        )
        lines[-1]["sse_subscribers_after"] = httpx.get(f"http://{HOST}:{port}/v1/health").json().get("streams")
    finally:
        if subs is not None:
            subs.kill()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
    return lines


def python_runs(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    gw = Gateway.open(f"sqlite:///{workdir}/python.db")
    lines = []
    try:
        heads = seed(gw)
        for op, make, name in (
            ("python_session_status_changes_since", lambda i: status_args(i, heads), "session_status"),
            ("python_sessions_send", send_args, "sessions_send"),
        ):
            calls = [make(i) for i in range(args.requests)]
            if name == "session_status":  # warm caches (reads only, so the measured run sees the same data)
                for a in calls[:500]:
                    gw.call_tool(name, a, caller=CALLER)
            lat: array = array("q")
            errors = 0
            start = time.perf_counter()
            for a in calls:
                t0 = time.perf_counter_ns()
                res = gw.call_tool(name, a, caller=CALLER)
                lat.append(time.perf_counter_ns() - t0)
                errors += "error" in res
            lines.append(percentiles(lat, time.perf_counter() - start, op, errors=errors, transport="python"))
    finally:
        gw.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20_000, help="requests per operation (bounded)")
    p.add_argument("--clients", type=int, default=2, help="load-generator processes")
    p.add_argument("--connections", type=int, default=4, help="keep-alive connections per process")
    p.add_argument("--subscribers", type=int, default=100, help="SSE wake streams held open during HTTP runs")
    p.add_argument("--store", default=None, help="store URL for the gateway (default: a fresh SQLite file)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sw-http-bench-") as tmp:
        workdir = Path(tmp)
        lines = http_runs(args, workdir) + python_runs(args, workdir)
    by_op = {line["op"]: line for line in lines}
    for line in lines:
        print(json.dumps(line), flush=True)
    ratio: dict[str, Any] = {"op": "ratio", "meta": True}
    for short in ("session_status_changes_since", "sessions_send"):
        h, py = by_op[f"http_{short}"], by_op[f"python_{short}"]
        ratio[f"{short}_python_over_http"] = round(py["per_sec"] / h["per_sec"], 2) if h["per_sec"] else None
        ratio[f"{short}_http_p99_us"] = h["p99_us"]
    print(json.dumps(ratio), flush=True)
    return 1 if any(line.get("errors") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
