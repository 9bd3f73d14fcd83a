"""What an open dashboard and 100 log-stream subscribers cost HTTP tool-call throughput.

    python -m benchmarks.dashboard_overhead [--requests 4000] [--rounds 2] [--subscribers 100]
                                            [--browser auto|chromium|none]

Each round starts two fresh gateways in turn (same seed, see http_load.py): one with nothing attached
(the baseline), one with ``--subscribers`` clients following ``GET /v1/events/stream`` and the
dashboard open at /ui in the system's headless Chromium (when there is one; otherwise a client that
makes the dashboard's calls: the overview after each log batch, at most every 100 ms). Against each it
measures ``session_status`` with ``changesSince`` (reads), ``sessions_send`` and a person's ``inbound``
turn into a watched session (writes that every stream then carries). Prints one JSON line per run and a
final ``ratio`` line: attached / baseline throughput per operation (median over the rounds).

``--browser auto`` (the default) uses Chromium when there is one and falls back to the request pattern,
saying so on stderr and in the JSON lines (``dashboard``), when it is missing or does not come up;
``--browser chromium`` fails instead, ``--browser none`` never starts one. Every wait (the gateway, the
followers, the browser, each load run) is bounded and progress goes to stderr, so a run never sits
silent: a default run takes about a minute on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import http_load  # the shared load generator and workload

READY_SECONDS = 90  # how long a follower or dashboard process may take to come up (spawn, imports, browser)


def progress(msg: str) -> None:
    print(f"# dashboard_overhead: {msg}", file=sys.stderr, flush=True)


def inbound_request(i: int, port: int) -> bytes:
    body = json.dumps({"text": f"person says {i}", "channel": "web"}, separators=(",", ":")).encode()
    # Host names this server with its port: the browser guard refuses any other (docs/security.md).
    return (
        f"POST /v1/sessions/{http_load.target(i)}/inbound HTTP/1.1\r\nHost: {http_load.HOST}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


async def _follower(port: int, ready: list[int], total: int, done: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection(http_load.HOST, port)
    writer.write(f"GET /v1/events/stream HTTP/1.1\r\nHost: {http_load.HOST}:{port}\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    ready[0] += 1
    if ready[0] == total:
        done.set()
    while await reader.read(65536):
        pass


def _followers_process(port: int, n: int, status: Any, stop: Any) -> None:
    async def follow() -> None:
        ready, done = [0], asyncio.Event()
        tasks = [asyncio.create_task(_follower(port, ready, n, done)) for _ in range(n)]
        await asyncio.wait_for(done.wait(), READY_SECONDS)
        status.put(("ready", f"{n} log-stream followers connected"))
        await asyncio.to_thread(stop.wait)  # a multiprocessing Event: waited for on a thread
        for t in tasks:
            t.cancel()

    try:
        asyncio.run(follow())
    except BaseException as exc:
        status.put(("error", f"log-stream followers: {type(exc).__name__}: {exc}"))
        raise


def _request_pattern(port: int, status: Any, stop: Any, note: str) -> None:
    """The dashboard's calls without a browser: the overview after each log batch, at most every 100 ms."""
    with httpx.Client(base_url=f"http://{http_load.HOST}:{port}", timeout=10) as http:
        http.get("/v1/ui/overview").raise_for_status()
        status.put(("ready", note))
        while not stop.is_set():
            http.get("/v1/ui/overview")
            time.sleep(0.1)


def _dashboard_process(port: int, browser: str, status: Any, stop: Any) -> None:
    """The dashboard page in headless Chromium, or its request pattern when there is no browser."""
    try:
        chromium = find_chromium() if browser != "none" else None
        if chromium is None:
            if browser == "chromium":
                raise RuntimeError("--browser chromium, but there is no chromium on PATH")
            _request_pattern(
                port,
                status,
                stop,
                "request pattern (no chromium on this machine)"
                if browser == "auto"
                else "request pattern (--browser none)",
            )
            return
        try:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                # Every wait is bounded: a browser that cannot start here fails in seconds, not minutes.
                b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"], timeout=30_000)
                try:
                    page = b.new_page()
                    page.goto(f"http://{http_load.HOST}:{port}/ui#graph", timeout=30_000)
                    page.wait_for_selector("#status.live", timeout=30_000)
                    status.put(("ready", "headless Chromium"))
                    while not stop.is_set():
                        page.wait_for_timeout(200)
                finally:
                    b.close()  # closed here, so no browser outlives the run
        except Exception as exc:
            if browser == "chromium":
                raise
            first = (str(exc).splitlines() or [""])[0][:200]
            _request_pattern(port, status, stop, f"request pattern (Chromium failed: {type(exc).__name__}: {first})")
    except BaseException as exc:
        status.put(("error", f"dashboard: {type(exc).__name__}: {exc}"))
        raise


def _wait_ready(status: Any, proc: Any, what: str) -> str:
    """The child's "ready" note; a clear error as soon as it fails, dies, or takes too long."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            kind, note = status.get(timeout=1)
        except queue.Empty:
            if not proc.is_alive():
                raise RuntimeError(f"{what} exited with code {proc.exitcode} before it was ready") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} was not ready within {READY_SECONDS} s") from None
            continue
        if kind == "error":
            raise RuntimeError(str(note))
        return str(note)


def one_gateway(args: argparse.Namespace, workdir: Path, attached: bool, tag: str) -> list[dict[str, Any]]:
    port = http_load.free_port()
    server = http_load.start_gateway(f"sqlite:///{workdir}/{tag}.db", port, workdir / f"{tag}.log")
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    children: list[Any] = []
    out: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    try:
        from sessionwatch.client import GatewayClient

        with GatewayClient(f"http://{http_load.HOST}:{port}") as client:
            heads = http_load.seed(client)
        if attached:
            for target, more, what in (
                (_followers_process, (args.subscribers,), "the log-stream followers"),
                (_dashboard_process, (args.browser,), "the dashboard"),
            ):
                status = ctx.Queue()
                proc = ctx.Process(target=target, args=(port, *more, status, stop), daemon=True)
                proc.start()
                children.append(proc)
                note = _wait_ready(status, proc, what)
                progress(f"{tag}: {what}: {note}")
                if target is _dashboard_process:
                    extra["dashboard"] = note
        streams = httpx.get(f"http://{http_load.HOST}:{port}/v1/health").json().get("streams")
        n = args.requests
        reads = [http_load.raw_request("session_status", http_load.status_args(i, heads), port) for i in range(n)]
        sends = [http_load.raw_request("sessions_send", http_load.send_args(i), port) for i in range(n)]
        inbound = [inbound_request(i, port) for i in range(n)]
        http_load.run_http(port, "warmup", reads[: min(1000, n)], args.clients, args.connections)
        for op, reqs in (("session_status_changes_since", reads), ("sessions_send", sends), ("inbound", inbound)):
            started = time.monotonic()
            line = http_load.run_http(
                port, op, reqs, args.clients, args.connections, streams=streams, attached=attached, **extra
            )
            progress(
                f"{tag}: {op}: {line['per_sec']:.0f} calls/s, {line['errors']} errors "
                f"({time.monotonic() - started:.1f} s)"
            )
            out.append(line)
            print(json.dumps(line), flush=True)
    finally:
        stop.set()  # the children close their streams (and the browser) themselves; killed only if they hang
        for proc in children:
            proc.join(15)
            if proc.is_alive():
                proc.kill()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=4000, help="requests per operation and run")
    p.add_argument("--rounds", type=int, default=2, help="baseline/attached pairs (the ratio is their median)")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--subscribers", type=int, default=100, help="log-stream followers while attached")
    p.add_argument(
        "--browser",
        choices=["auto", "chromium", "none"],
        default="auto",
        help="auto: Chromium when it comes up, else the dashboard's request pattern",
    )
    args = p.parse_args(argv)
    ratios: dict[str, list[float]] = {}
    dashboards: set[str] = set()
    errors = 0
    with tempfile.TemporaryDirectory(prefix="sw-dash-bench-") as tmp:
        for r in range(args.rounds):
            progress(f"round {r + 1}/{args.rounds}: a gateway with nothing attached")
            base = {x["op"]: x for x in one_gateway(args, Path(tmp), False, f"base{r}")}
            progress(f"round {r + 1}/{args.rounds}: a gateway with the dashboard and {args.subscribers} followers")
            att = {x["op"]: x for x in one_gateway(args, Path(tmp), True, f"attached{r}")}
            for op in base:
                ratios.setdefault(op, []).append(att[op]["per_sec"] / base[op]["per_sec"])
                errors += base[op]["errors"] + att[op]["errors"]
                dashboards.add(str(att[op].get("dashboard")))
    print(
        json.dumps(
            {
                "op": "ratio",
                "meta": True,
                "attached_over_baseline": {op: round(statistics.median(v), 3) for op, v in ratios.items()},
                "rounds": args.rounds,
                "requests": args.requests,
                "subscribers": args.subscribers,
                "dashboard": " / ".join(sorted(dashboards)),
            }
        ),
        flush=True,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
