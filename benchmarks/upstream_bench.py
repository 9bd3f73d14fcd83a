"""Upstream monitor benchmark (JSON lines on stdout).

* ``upstream_tick_unchanged``: one monitor tick over N watched, unchanged Claude transcripts (a stat
  each; target < 0.5 s for 1,000).
* ``upstream_scan_new_data``: monitor ticks until M MB of freshly appended transcript data (Claude
  and Codex, a realistic mix of prompts, replies, tool calls and large tool results) is scanned and
  its human turns recorded (target >= 50 MB/s).
* ``classify_rows`` / ``stream_oversized_row``: the row classifier alone, fast path and the bounded
  memory path for rows larger than the window (informative).

Usage: ``python -m benchmarks.upstream_bench [--links 1000] [--mb 100] [--quick] [--tmp DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from sessionwatch.hosts.claude_code.transcripts import RULES as CLAUDE

WATCHER = "agent:bench:main"


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def claude_rows(rnd: random.Random, session: str, target_bytes: int) -> tuple[bytes, int]:
    """A Claude Code transcript body: mostly replies, tool calls and tool results; a prompt now and then."""
    out: list[bytes] = []
    size = humans = 0
    parent = None
    n = 0
    while size < target_bytes:
        n += 1
        uid = str(uuid.UUID(int=rnd.getrandbits(128)))
        env: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/acme-api",
            "sessionId": session,
            "version": "2.1.310",
            "gitBranch": "main",
        }
        r = rnd.random()
        if r < 0.04:
            row: dict[str, Any] = {
                **env,
                "type": "user",
                "message": {"role": "user", "content": f"please look at issue {n} " * 4},
                "uuid": uid,
                "timestamp": "2027-01-15T07:00:00.000Z",
                "promptSource": "typed",
            }
            humans += 1
        elif r < 0.45:
            row = {
                **env,
                "type": "assistant",
                "message": {
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6",
                    "content": [{"type": "text", "text": "Looking into it. " * 30}],
                    "usage": {"input_tokens": 10, "output_tokens": 90},
                },
                "uuid": uid,
                "timestamp": "2027-01-15T07:00:00.000Z",
            }
        elif r < 0.7:
            row = {
                **env,
                "type": "assistant",
                "message": {
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"toolu_{n}",
                            "name": "Read",
                            "input": {"file_path": f"/home/dev/acme-api/src/mod{n}.py"},
                        }
                    ],
                },
                "uuid": uid,
                "timestamp": "2027-01-15T07:00:00.000Z",
            }
        else:
            body = "    def handler(self, request):\n        return self.respond(request)\n" * rnd.randint(5, 300)
            row = {
                **env,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"tool_use_id": f"toolu_{n}", "type": "tool_result", "content": body}],
                },
                "uuid": uid,
                "timestamp": "2027-01-15T07:00:00.000Z",
                "toolUseResult": {"type": "text", "file": {"content": body, "numLines": body.count("\n")}},
            }
        data = line(row)
        out.append(data)
        size += len(data)
        parent = uid
    return b"".join(out), humans


def codex_rows(rnd: random.Random, target_bytes: int) -> tuple[bytes, int]:
    out: list[bytes] = []
    size = humans = 0
    ts = "2027-01-15T07:00:00.000Z"
    while size < target_bytes:
        r = rnd.random()
        if r < 0.04:
            text = "run the tests and fix what fails " * 3
            rows = [
                {
                    "timestamp": ts,
                    "type": "response_item",
                    "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
                },
                {"timestamp": ts, "type": "event_msg", "payload": {"type": "user_message", "message": text}},
            ]
            humans += 1
        elif r < 0.5:
            rows = [
                {
                    "timestamp": ts,
                    "type": "event_msg",
                    "payload": {"type": "agent_message", "message": "Working on it. " * 40},
                }
            ]
        else:
            output = "test_retry.py::test_backoff PASSED\n" * rnd.randint(5, 400)
            rows = [
                {
                    "timestamp": ts,
                    "type": "response_item",
                    "payload": {
                        "type": "function_call_output",
                        "call_id": "c",
                        "output": json.dumps({"output": output}),
                    },
                }
            ]
        for row in rows:
            data = line(row)
            out.append(data)
            size += len(data)
    return b"".join(out), humans


def bench_unchanged(tmp: Path, links: int, repeats: int) -> None:
    root = tmp / "claude"
    clock = ManualClock()
    gw = Gateway.open(f"sqlite:///{tmp}/tick.db", clock=clock)
    gw.upstream.configure(claude_root=root, codex_root=tmp / "codex")
    gw.put_session(WATCHER)
    rnd = random.Random(1)
    for i in range(links):
        project = root / "projects" / f"-home-dev-project-{i % 20}"
        project.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.UUID(int=rnd.getrandbits(128)))
        body, _ = claude_rows(rnd, sid, 2000)
        (project / f"{sid}.jsonl").write_bytes(body)
        res = gw.continue_thread("claude", sid)
        gw.watch(WATCHER, res["sessionKey"])
    times = []
    for _ in range(repeats):
        clock.advance(60_000)
        t0 = time.perf_counter()
        result = gw.upstream_tick()
        times.append(time.perf_counter() - t0)
        assert len(result["links"]) == links and all(e["status"] == "unchanged" for e in result["links"])
    gw.close()
    best, median = min(times), statistics.median(times)
    emit(
        op="upstream_tick_unchanged",
        n=links,
        seconds=round(median, 4),
        best_seconds=round(best, 4),
        per_sec=round(links / median),
        target_seconds=0.5,
        ok=median < 0.5 * links / 1000,
    )


def bench_new_data(tmp: Path, mb: int) -> None:
    root_c, root_x = tmp / "claude", tmp / "codex"
    clock = ManualClock()
    gw = Gateway.open(f"sqlite:///{tmp}/scan.db", clock=clock)
    gw.upstream.configure(claude_root=root_c, codex_root=root_x)
    gw.put_session(WATCHER)
    rnd = random.Random(2)
    files = max(2, mb // 5)
    per_file = mb * 1_000_000 // files
    pending: list[tuple[Path, bytes]] = []
    humans = 0
    keys = []
    for i in range(files):
        if i % 4 == 3:  # a quarter Codex rollouts
            tid = str(uuid.UUID(int=rnd.getrandbits(128)))
            folder = root_x / "sessions" / "2027" / "01" / "15"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"rollout-2027-01-15T07-00-00-{tid}.jsonl"
            path.write_bytes(b"")
            body, h = codex_rows(rnd, per_file)
            res = gw.continue_thread("codex", tid)
        else:
            tid = str(uuid.UUID(int=rnd.getrandbits(128)))
            project = root_c / "projects" / f"-home-dev-p{i}"
            project.mkdir(parents=True, exist_ok=True)
            path = project / f"{tid}.jsonl"
            path.write_bytes(b"")
            body, h = claude_rows(rnd, tid, per_file)
            res = gw.continue_thread("claude", tid)
        gw.watch(WATCHER, res["sessionKey"])
        keys.append(res["sessionKey"])
        pending.append((path, body))
        humans += h
    total = 0
    for path, body in pending:  # the CLIs append after adoption
        with open(path, "ab") as fh:
            fh.write(body)
        total += len(body)
    ticks = 0
    t0 = time.perf_counter()
    while True:
        clock.advance(60_000)
        result = gw.upstream_tick()
        ticks += 1
        if all(e["status"] == "unchanged" for e in result["links"]):
            break
    elapsed = time.perf_counter() - t0
    counted = 0
    for key in keys:
        for e in gw.changes_since(key, 0).to_json()["events"]:
            if e["kind"] == "human_direct_message":
                counted += (e.get("payload") or {}).get("turns", 1)
    gw.close()
    assert counted == humans, (counted, humans)
    emit(
        op="upstream_scan_new_data",
        n=total,
        files=files,
        ticks=ticks,
        human_turns=humans,
        seconds=round(elapsed, 3),
        mb_per_sec=round(total / 1e6 / elapsed, 1),
        target_mb_per_sec=50,
        ok=total / 1e6 / elapsed >= 50,
    )


def bench_classifier(mb: int) -> None:
    rnd = random.Random(3)
    body, _ = claude_rows(rnd, "s", mb * 1_000_000)
    rows = body.split(b"\n")[:-1]
    t0 = time.perf_counter()
    humans = sum(1 for r in rows if CLAUDE.classify(r).human)
    el = time.perf_counter() - t0
    emit(
        op="classify_rows",
        n=len(rows),
        bytes=len(body),
        human=humans,
        seconds=round(el, 3),
        mb_per_sec=round(len(body) / 1e6 / el, 1),
    )
    big = line(
        {
            "type": "user",
            "message": {"role": "user", "content": "pasted log line\n" * 300_000},
            "promptSource": "typed",
            "timestamp": "2027-01-15T07:00:00.000Z",
        }
    )[:-1]
    t0 = time.perf_counter()
    state = None
    for i in range(0, len(big), 1 << 20):
        s = CLAUDE.stream(state)
        s.feed(big[i : i + (1 << 20)])
        state = json.loads(json.dumps(s.to_state()))
    verdict = CLAUDE.stream(state).finish()
    el = time.perf_counter() - t0
    assert verdict.human
    emit(op="stream_oversized_row", n=1, bytes=len(big), seconds=round(el, 3), mb_per_sec=round(len(big) / 1e6 / el, 1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--links", type=int, default=1000)
    p.add_argument("--mb", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="100 links, 10 MB")
    p.add_argument("--tmp", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.links, args.mb, args.repeats = 100, 10, 3
    base = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="sw-upstream-bench-"))
    emit(
        meta=True,
        python=platform.python_version(),
        machine=platform.machine(),
        cpus=os.cpu_count(),
        links=args.links,
        mb=args.mb,
    )
    try:
        d1, d2 = base / "tick", base / "scan"
        d1.mkdir(parents=True, exist_ok=True)
        d2.mkdir(parents=True, exist_ok=True)
        bench_unchanged(d1, args.links, args.repeats)
        bench_new_data(d2, args.mb)
        bench_classifier(min(args.mb, 20))
    finally:
        if args.tmp is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
