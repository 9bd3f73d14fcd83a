"""What an open dashboard and 100 log-stream subscribers cost HTTP tool-call throughput.

    python benchmarks/dashboard_overhead.py [--requests 4000] [--rounds 2] [--subscribers 100]

Each round starts two fresh gateways in turn (same seed, see http_load.py): one with nothing attached
(the baseline), one with ``--subscribers`` clients following ``GET /v1/events/stream`` and the
dashboard open at /ui in the system's headless Chromium (when there is one; otherwise a client that
makes the dashboard's calls: the overview after each log batch, at most every 100 ms). Against each it
measures ``session_status`` with ``changesSince`` (reads), ``sessions_send`` and a person's ``inbound``
turn into a watched session (writes that every stream then carries). Prints one JSON line per run and a
final ``ratio`` line: attached / baseline throughput per operation (median over the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import http_load as hl  # the shared load generator and workload (imported after the path is set)


def inbound_request(i: int) -> bytes:
    body = json.dumps({"text": f"person says {i}", "channel": "web"}, separators=(",", ":")).encode()
    return (f"POST /v1/sessions/{hl.target(i)}/inbound HTTP/1.1\r\nHost: {hl.HOST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _follower(port: int, ready: list[int], total: int, done: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection(hl.HOST, port)
    writer.write(f"GET /v1/events/stream HTTP/1.1\r\nHost: {hl.HOST}:{port}\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    ready[0] += 1
    if ready[0] == total:
        done.set()
    while await reader.read(65536):
        pass


def _followers_process(port: int, n: int, flag: Any) -> None:
    async def main() -> None:
        ready, done = [0], asyncio.Event()
        tasks = [asyncio.create_task(_follower(port, ready, n, done)) for _ in range(n)]
        await done.wait()
        flag.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def _dashboard_process(port: int, flag: Any) -> None:
    """The dashboard page in headless Chromium, or its request pattern when there is no browser."""
    chromium = shutil.which("chromium")
    try:
        if chromium is None:
            raise ImportError("no chromium")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(f"http://{hl.HOST}:{port}/ui#graph")
            page.wait_for_selector("#status.live", timeout=30_000)
            flag.set()
            while True:
                page.wait_for_timeout(1000)
    except ImportError:
        with httpx.Client(base_url=f"http://{hl.HOST}:{port}", timeout=10) as http:
            flag.set()
            while True:
                http.get("/v1/ui/overview")
                time.sleep(0.1)


def one_gateway(args: argparse.Namespace, workdir: Path, attached: bool, tag: str) -> list[dict[str, Any]]:
    port = hl.free_port()
    server = hl.start_gateway(f"sqlite:///{workdir}/{tag}.db", port, workdir / f"{tag}.log")
    children: list[Any] = []
    out: list[dict[str, Any]] = []
    try:
        from sessionwatch.client import GatewayClient

        with GatewayClient(f"http://{hl.HOST}:{port}") as client:
            heads = hl.seed(client)
        ctx = mp.get_context("spawn")
        if attached:
            for target, extra in ((_followers_process, (args.subscribers,)), (_dashboard_process, ())):
                flag = ctx.Event()
                proc = ctx.Process(target=target, args=(port, *extra, flag), daemon=True)
                proc.start()
                children.append(proc)
                assert flag.wait(60), f"{target.__name__} did not start"
        streams = httpx.get(f"http://{hl.HOST}:{port}/v1/health").json().get("streams")
        n = args.requests
        # The browser guard wants this server's port in Host (http_load.raw_request sends the bare address).
        own = f"Host: {hl.HOST}:{port}\r\n".encode()

        def fix(req: bytes) -> bytes:
            return req.replace(f"Host: {hl.HOST}\r\n".encode(), own, 1)

        status = [fix(hl.raw_request("session_status", hl.status_args(i, heads))) for i in range(n)]
        send = [fix(hl.raw_request("sessions_send", hl.send_args(i))) for i in range(n)]
        inbound = [fix(inbound_request(i)) for i in range(n)]
        hl.run_http(port, "warmup", status[: min(1000, n)], args.clients, args.connections)
        for op, reqs in (("session_status_changes_since", status), ("sessions_send", send), ("inbound", inbound)):
            line = hl.run_http(port, op, reqs, args.clients, args.connections, streams=streams,
                               attached=attached)
            out.append(line)
            print(json.dumps(line), flush=True)
    finally:
        for proc in children:
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
    args = p.parse_args(argv)
    ratios: dict[str, list[float]] = {}
    errors = 0
    with tempfile.TemporaryDirectory(prefix="sw-dash-bench-") as tmp:
        for r in range(args.rounds):
            base = {x["op"]: x for x in one_gateway(args, Path(tmp), False, f"base{r}")}
            att = {x["op"]: x for x in one_gateway(args, Path(tmp), True, f"attached{r}")}
            for op in base:
                ratios.setdefault(op, []).append(att[op]["per_sec"] / base[op]["per_sec"])
                errors += base[op]["errors"] + att[op]["errors"]
    print(json.dumps({"op": "ratio", "meta": True, "attached_over_baseline": {
        op: round(statistics.median(v), 3) for op, v in ratios.items()}, "rounds": args.rounds,
        "subscribers": args.subscribers}), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
