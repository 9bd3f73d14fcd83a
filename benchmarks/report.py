"""Run every benchmark program in one go and rewrite the generated part of docs/benchmarks.md.

    python -m benchmarks.report [--quick] [--only peer,http,...] [--skip ...] [--stdout]

One run, one machine: the page's part between ``<!-- report:begin -->`` and ``<!-- report:end -->`` is
replaced by the run's date (UTC), the machine and software it ran on, the exact command, and one section
per benchmark (its table, from the program's JSON lines). Nothing outside the markers is touched (the
growth benchmark above them has its own program). Progress goes to stderr. A program that fails (or
runs past ``--timeout``) is reported as failed in its section, the other sections are still written, and
the run exits 1 at the end. Sections left out with ``--only``/``--skip`` keep their heading (so links to
them hold) and say they were not run; with ``--merge`` they keep what the page has instead, and the
sections run say when they ran (a section re-measured on its own).

Benchmarks (``--only``/``--skip`` keys): peer (compare.py, ours against OpenClaw's own implementation,
through the peer harness in benchmarks/peer/openclaw/, or another one given with ``--peer``), hooks
(engine/hook_latency.py and engine/mcp_start.py: the hook command, the HTTP hooks and the MCP server's
start, next to an interleaved ``python -c pass``), http
(http_load.py), pg (pg_vs_sqlite.py), scaling (pg_scaling.py), upstream (upstream_bench.py), dashboard
(dashboard_overhead.py), metrics (metrics_overhead.py). ``--quick`` passes each program's quick mode, or
smaller counts where it has none.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import PEER_HARNESS, ROOT, compare, pg_vs_sqlite

PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
WIDTH = 110

Lines = list[dict[str, Any]]


# -- the benchmarks --------------------------------------------------------------------------------
@dataclass
class Options:
    quick: bool
    peer: str
    store: str
    out: Path  # scratch folder for the programs' raw output files


@dataclass
class Bench:
    key: str
    title: str  # the section heading; its anchor is what other pages link to, so keep it stable
    about: str  # what the program measures and how to read it (no figures: those come from the run)
    argv: Callable[[Options], list[str]]  # the program and its arguments, run with this Python from ROOT
    render: Callable[[Lines], str]  # the program's JSON lines -> the section's Markdown
    collect: Callable[[Lines, Options], Lines] = field(default=lambda stdout, _o: stdout)


def _jsonl(path: Path, **tag: Any) -> Lines:
    if not path.exists():
        return []
    return [{**json.loads(x), **tag} for x in path.read_text().splitlines() if x.startswith("{")]


def _num(x: Any, digits: int = 0) -> str:
    if not isinstance(x, (int, float)):
        return "–" if x is None else str(x)
    return f"{x:,.{digits}f}"


def _ops(lines: Lines) -> dict[str, dict[str, Any]]:
    return {d["op"]: d for d in lines if "op" in d}


def render_peer(lines: Lines) -> str:
    peer = [d for d in lines if d.get("side") == "peer"]
    ours = [d for d in lines if d.get("side") == "ours"]
    info_peer = _ops(peer).get("info", {})
    info_ours = _ops(ours).get("info", {})
    out = [
        f"Peer: OpenClaw {info_peer.get('openclaw_version', '?')} on Node {info_peer.get('node', '?')} "
        f"(SQLite {info_peer.get('sqlite_version', '?')}); sessionwatch on SQLite "
        f"{info_ours.get('sqlite_version', '?')}.",
        "",
        compare.table(peer, ours),
    ]
    return "\n".join(out)


def _ratio(x: Any) -> str:
    return "–" if not isinstance(x, (int, float)) else f"{x:.2f}×"


def _met(x: Any) -> str:
    return "–" if x is None else ("yes" if x else "**no**")


def render_hooks(lines: Lines) -> str:
    hooks = [d for d in lines if d.get("op") == "hook-latency"]
    mcp = [d for d in lines if d.get("op") == "mcp-start"]
    out: list[str] = []
    if hooks:
        out += [
            "A hook run per prompt and per tool call, from process start to exit (Python start-up included); each run "
            "has one `python -c pass` run beside it, so every case has its own floor from the same minutes. "
            "Claude Code's HTTP hook is one POST to the gateway's hook route on a fresh connection (no process): "
            "its figure is the time it adds to an event.",
            "",
            "| case | via | p50 ms | p95 ms | floor p50 ms | floor p95 ms | ratio p50 | ratio p95 | CPU p95 ms | "
            "target | met |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for d in hooks:
            out.append(
                f"| {d.get('case')} | {'gateway' if d.get('mode') == 'gateway' else 'local store'} | "
                f"{_num(d.get('p50_ms'), 1)} | "
                f"{_num(d.get('p95_ms'), 1)} | {_num(d.get('floor_p50_ms'), 1)} | {_num(d.get('floor_p95_ms'), 1)} | "
                f"{_ratio(d.get('ratio_to_floor_p50'))} | {_ratio(d.get('ratio_to_floor_p95'))} | "
                f"{_num(d.get('cpu_p95_ms'), 1)} | {d.get('target', '–')} | {_met(d.get('within'))} |"
            )
        served = [d for d in hooks if d.get("server_cpu_ms_per_event") is not None]
        if served:
            out += [
                "",
                f"The gateway's own CPU time per HTTP hook event: {served[0]['server_cpu_ms_per_event']:.2f} ms "
                "(mean), which other work on the machine does not inflate.",
            ]
        budget = next((d for d in lines if d.get("op") == "hook-latency-budget"), {})
        if budget.get("load_average") is not None:
            out += [
                "",
                f"Load average {budget['load_average']:.1f} on {budget.get('cores', '?')} cores when the hook cases "
                "ended: wall time includes waiting for a core, which the floor beside each run waits for too.",
            ]
    if mcp:
        out += [
            "",
            "The MCP server, from starting `sessionwatch mcp` until it has answered the host's `tools/list` (the "
            "opening each host sends), with the quick start and without it (`SESSIONWATCH_MCP_QUICKSTART=0`), each "
            "start beside one `python -c pass` run. CPU is the server process's, from its start to its exit once "
            "the host has closed it after the opening (a session that calls no sessionwatch tool): with the quick "
            "start the MCP SDK is never loaded then.",
            "",
            "| host | quick start | tools listed p50 ms | p95 ms | floor p50 ms | floor p95 ms | ratio p50 | "
            "ratio p95 | CPU p50 ms | target | met |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
        ]
        for d in mcp:
            listed = d.get("tools_listed") or {}
            out.append(
                f"| {d.get('host')} | {'yes' if d.get('quick_start') else 'no'} | {_num(listed.get('p50_ms'), 1)} | "
                f"{_num(listed.get('p95_ms'), 1)} | {_num(d.get('floor_p50_ms'), 1)} | "
                f"{_num(d.get('floor_p95_ms'), 1)} | {_ratio(d.get('ratio_to_floor_p50'))} | "
                f"{_ratio(d.get('ratio_to_floor_p95'))} | {_num(d.get('cpu_p50_ms'), 1)} | "
                # without the quick start: the path before it, for comparison (no target of its own)
                + (
                    f"p95 ≤ {_num(d.get('budget_ms'))} ms | {_met(d.get('within'))} |"
                    if d.get("quick_start")
                    else "– | – |"
                )
            )
    return "\n".join(out).strip()


def render_http(lines: Lines) -> str:
    by = _ops(lines)
    out = [
        "| operation | HTTP calls/s | HTTP p50 µs | HTTP p99 µs | server CPU µs/call | Python calls/s | "
        "Python p50 µs | Python / HTTP |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for short, name in (
        ("session_status_changes_since", "`session_status` + `changesSince`"),
        ("sessions_send", "`sessions_send`"),
    ):
        h, py = by.get(f"http_{short}", {}), by.get(f"python_{short}", {})
        ratio = py["per_sec"] / h["per_sec"] if h.get("per_sec") and py.get("per_sec") else None
        out.append(
            f"| {name} | {_num(h.get('per_sec'))} | {_num(h.get('p50_us'), 1)} | {_num(h.get('p99_us'), 1)} | "
            f"{_num(h.get('server_cpu_us_per_req'), 1)} | {_num(py.get('per_sec'))} | "
            f"{_num(py.get('p50_us'), 1)} | {'–' if ratio is None else f'{ratio:.1f}×'} |"
        )
    first = by.get("http_session_status_changes_since", {})
    out += [
        "",
        f"{_num(first.get('n'))} calls per operation from {first.get('connections', '?')} keep-alive "
        f"connections, {first.get('sse_subscribers', '?')} SSE subscribers connected; errors: "
        f"{sum(d.get('errors', 0) for d in lines)}. Target: ≥ 1,500 HTTP tool calls/s with p99 < 20 ms.",
    ]
    return "\n".join(out)


def render_pg(lines: Lines) -> str:
    sqlite = [d for d in lines if d.get("side") == "sqlite"]
    pg = [d for d in lines if d.get("side") == "postgresql"]
    out = [pg_vs_sqlite.table(sqlite, pg)]
    rt = _ops(pg).get("select_1_round_trip")
    if rt:
        out += [
            "",
            f"The floor under every PostgreSQL call: a bare `SELECT 1` round trip from psycopg to the server "
            f"took {_num(rt.get('p50_us'), 1)} µs (p50 of {_num(rt.get('n'))}; p99 {_num(rt.get('p99_us'), 1)} "
            "µs).",
        ]
    return "\n".join(out)


def render_scaling(lines: Lines) -> str:
    meta = _ops(lines).get("run", {})
    out = [
        "| watchers per session | processes | events/s | raw floor events/s | ratio to the floor "
        "| ratio to 1 process | p50 µs | p99 µs | log dense |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for d in lines:
        if str(d.get("op", "")).startswith("pg_record_"):
            out.append(
                f"| {d.get('watchers')} | {d.get('procs')} | {_num(d.get('per_sec'))} | "
                f"{_num(d.get('floor_per_sec'))} | {_num(d.get('ratio_vs_floor'), 2)} | "
                f"{_num(d.get('ratio_vs_1'), 2)} | {_num(d.get('p50_us'), 1)} | {_num(d.get('p99_us'), 1)} | "
                f"{'yes' if d.get('dense') else '**no**'} |"
            )
    out += [
        "",
        f'`synchronous_commit`: {meta.get("synchronous_commit", "?")}. "Raw floor": the same number of '
        "processes of plain psycopg, each append one event insert plus one head upsert, committed durably "
        "with the same commit settings, run right before on a fresh database. Every sessionwatch append is "
        "durable before its answer too (one flush shared by the writers waiting at that moment). "
        '"Log dense": the log holds exactly the events recorded, numbered without gaps.',
    ]
    return "\n".join(out)


def render_upstream(lines: Lines) -> str:
    by = _ops(lines)
    out = ["| op | result | target | met |", "|---|---|---|---|"]
    tick = by.get("upstream_tick_unchanged")
    if tick:
        out.append(
            f"| one tick over {_num(tick.get('n'))} watched, unchanged transcripts | "
            f"{_num(tick.get('seconds'), 3)} s median (best {_num(tick.get('best_seconds'), 3)} s) | "
            f"< {_num(0.5 * tick.get('n', 1000) / 1000, 2)} s | {'yes' if tick.get('ok') else '**no**'} |"
        )
    scan = by.get("upstream_scan_new_data")
    if scan:
        out.append(
            f"| scanning {_num(scan.get('n', 0) / 1e6)} MB of newly appended Claude and Codex data "
            f"({scan.get('files')} files, {_num(scan.get('human_turns'))} human turns recorded) | "
            f"{scan.get('ticks')} ticks, {_num(scan.get('seconds'), 2)} s, "
            f"**{_num(scan.get('mb_per_sec'))} MB/s** | ≥ 50 MB/s | {'yes' if scan.get('ok') else '**no**'} |"
        )
    cls = by.get("classify_rows")
    if cls:
        out.append(
            f"| the row classifier alone (fast path, {_num(cls.get('bytes', 0) / 1e6)} MB) | "
            f"{_num(cls.get('mb_per_sec'))} MB/s | – | – |"
        )
    big = by.get("stream_oversized_row")
    if big:
        out.append(
            f"| one oversized {_num(big.get('bytes', 0) / 1e6, 1)} MB row through the bounded-memory path, "
            f"state round-tripped per MiB | {_num(big.get('mb_per_sec'))} MB/s | – | – |"
        )
    return "\n".join(out)


def render_dashboard(lines: Lines) -> str:
    ratio = _ops(lines).get("ratio", {})
    runs = [d for d in lines if not d.get("meta") and "per_sec" in d]
    out = [
        "| operation | nothing attached, calls/s | dashboard + followers, calls/s | attached / baseline |",
        "|---|---:|---:|---:|",
    ]
    for op, share in (ratio.get("attached_over_baseline") or {}).items():
        base = [d["per_sec"] for d in runs if d["op"] == op and not d.get("attached")]
        att = [d["per_sec"] for d in runs if d["op"] == op and d.get("attached")]
        mid = lambda v: sorted(v)[len(v) // 2] if v else None  # noqa: E731
        out.append(f"| `{op}` | {_num(mid(base))} | {_num(mid(att))} | {_num(share, 2)} |")
    out += [
        "",
        f"Median over {ratio.get('rounds', '?')} round(s) of {_num(ratio.get('requests'))} calls per "
        f"operation; {ratio.get('subscribers', '?')} clients following the log stream; the dashboard: "
        f"{ratio.get('dashboard', '?')}. A ratio of 1 means no cost; below 1, the attached gateway was slower.",
    ]
    return "\n".join(out)


def render_metrics(lines: Lines) -> str:
    rows = [d for d in lines if not d.get("meta") and "cpu_us" in d]
    ratio = (_ops(lines).get("ratio") or {}).get("observed_over_plain", {})
    out = [
        "| operation (in process) | CPU µs/call, no observer | CPU µs/call, metrics observer | with / without | "
        "wall µs/call, without → with |",
        "|---|---:|---:|---:|---|",
    ]
    for op, share in ratio.items():
        off = next((d for d in rows if d["op"] == op and d.get("observer") == "off"), {})
        on = next((d for d in rows if d["op"] == op and d.get("observer") == "on"), {})
        out.append(
            f"| `{op}` | {_num(off.get('cpu_us'), 1)} | {_num(on.get('cpu_us'), 1)} | {_num(share, 2)} | "
            f"{_num(off.get('wall_us'), 1)} → {_num(on.get('wall_us'), 1)} |"
        )
    first = rows[0] if rows else {}
    out += ["", f"Median over {first.get('rounds', '?')} alternating rounds of {_num(first.get('n'))} calls."]
    return "\n".join(out)


def _collect_peer(_stdout: Lines, o: Options) -> Lines:
    return _jsonl(o.out / "peer" / "peer.jsonl", side="peer") + _jsonl(
        o.out / "peer" / "sessionwatch.jsonl", side="ours"
    )


def _collect_pg(_stdout: Lines, o: Options) -> Lines:
    return _jsonl(o.out / "pg" / "pg_vs_sqlite.sqlite.jsonl", side="sqlite") + _jsonl(
        o.out / "pg" / "pg_vs_sqlite.postgresql.jsonl", side="postgresql"
    )


def _peer_argv(o: Options) -> list[str]:
    if not Path(o.peer).is_file():
        raise FileNotFoundError(f"the peer harness {o.peer} does not exist; pass --peer PATH")
    return ["-m", "benchmarks.compare", "--peer", o.peer, "--out", str(o.out / "peer"), *(["--quick"] * o.quick)]


BENCHES: list[Bench] = [
    Bench(
        "peer",
        "Engine vs the peer (OpenClaw)",
        "`python -m benchmarks.compare` runs the peer harness `benchmarks/peer/openclaw/run.sh` (OpenClaw's "
        "own session-state code from its npm package) and `python -m benchmarks.engine` (the same scenarios, "
        "op names and JSON shape, through sessionwatch's public engine API, a fresh SQLite file per scenario), "
        "and joins them on `op`. Ratio = "
        "ours / peer throughput, or peer p50 / our p50 for the `changes_since_*` reads, or peer time / our time "
        "for the sweep and the prune: above 1, sessionwatch is faster. sessionwatch does more per call than the "
        "peer: every append with watchers also writes the durable notice queue, and the sweep writes its "
        "notices durably. `raw_insert_baseline` is the floor: plain `sqlite3` inserting the same event row and "
        "head upsert, one transaction each, with the same pragmas and nothing else.",
        _peer_argv,
        render_peer,
        _collect_peer,
    ),
    Bench(
        "hooks",
        "Hooks and MCP start-up",
        "`python -m benchmarks.engine --only hook,mcp`: what a host waits for on every prompt and tool call (the "
        "hook command on a local store; through a gateway, Claude Code's HTTP hook, Codex's command hook and a "
        "run against a gateway remembered as down) and for the sessionwatch tools at a session's start, each "
        "case next to an interleaved `python -c pass` floor. Ratio = the case's p50 (p95) over its floor's "
        "p50 (p95). Figures measured side by side move far less with other work on the machine than absolute "
        "ones; the absolute targets (20 ms, 50 ms, 300 ms) assume a core to spare.",
        lambda o: ["-m", "benchmarks.engine", "--only", "hook,mcp", *(["--quick"] * o.quick)],
        render_hooks,
    ),
    Bench(
        "http",
        "HTTP gateway",
        "`python -m benchmarks.http_load` starts a real gateway (uvicorn with httptools and uvloop, one process) "
        "on a fresh SQLite store, holds SSE wake streams open, and drives `session_status` with `changesSince` "
        "and `sessions_send` from two load-generator processes speaking raw keep-alive HTTP/1.1 (one request in "
        "flight per connection); then it runs the same calls in process through `sessionwatch.Gateway`. The "
        "server's CPU time per call is the figure other work on the machine disturbs least.",
        lambda o: ["-m", "benchmarks.http_load", *(["--requests", "2000"] if o.quick else [])],
        render_http,
    ),
    Bench(
        "pg",
        "PostgreSQL vs SQLite",
        "`python -m benchmarks.pg_vs_sqlite` runs the engine scenarios against the local PostgreSQL server (a "
        "fresh database per scenario, the server's `synchronous_commit`) and against SQLite. Slower by = SQLite "
        "throughput / PostgreSQL throughput. Every PostgreSQL call is at least one round trip to the server "
        "(the `SELECT 1` floor below) and a write adds a durable commit, against SQLite's in-process calls with "
        "`synchronous=NORMAL`; batched work (`ack_batch`, `changes_since` pages, the prune, the fan-out to 100 "
        "watchers) pays the round trip once for many rows.",
        lambda o: [
            "-m",
            "benchmarks.pg_vs_sqlite",
            "--store",
            o.store,
            "--out",
            str(o.out / "pg"),
            *(["--quick"] * o.quick),
        ],
        render_pg,
        _collect_pg,
    ),
    Bench(
        "scaling",
        "PostgreSQL scaling",
        "`python -m benchmarks.pg_scaling`: aggregate recording throughput of 1, 4 and 8 gateway processes "
        "sharing one PostgreSQL database (a fresh database per run, 100 sessions, one transaction per event), "
        "each next to a raw psycopg floor with as many processes, measured in the same run. Writers serialize "
        "on the writer lock; extra gateways add throughput by overlapping everything around it, as far as free "
        "cores allow (on a 2-core machine the database server and the gateways share them).",
        lambda o: ["-m", "benchmarks.pg_scaling", "--store", o.store, *(["--events", "300"] if o.quick else [])],
        render_scaling,
    ),
    Bench(
        "upstream",
        "Upstream monitor",
        "`python -m benchmarks.upstream_bench`: one monitor tick over watched, unchanged Claude transcripts (a "
        "`stat` each), the scan of newly appended Claude and Codex transcript data until its human turns are "
        "recorded, and the row classifier alone. The files are in the page cache. (The prompt behind 200 MB of "
        "tool output is a slow test, `tests/upstream/test_backlog.py`, not part of this run.)",
        lambda o: ["-m", "benchmarks.upstream_bench", *(["--quick"] * o.quick)],
        render_upstream,
    ),
    Bench(
        "dashboard",
        "Dashboard overhead",
        "`python -m benchmarks.dashboard_overhead`: HTTP tool-call throughput on a fresh gateway with nothing "
        "attached, then on one with the dashboard open (headless Chromium when the machine has it, else a client "
        "making the dashboard's calls) and 100 clients following the log stream, for `session_status` with "
        "`changesSince`, `sessions_send` and a person's `inbound` turn (which every stream then carries). The "
        "log stream costs one store read per 200 ms poll however many clients follow, and each event is encoded "
        "once for all of them.",
        lambda o: [
            "-m",
            "benchmarks.dashboard_overhead",
            *(["--requests", "1000", "--rounds", "1"] if o.quick else []),
        ],
        render_dashboard,
    ),
    Bench(
        "metrics",
        "Metrics overhead",
        "`python -m benchmarks.metrics_overhead`: what the metrics observer behind `GET /metrics` (store "
        "operations timed, notices counted; every HTTP gateway runs it) costs an engine call, measured in "
        "process, where nothing else hides it: two gateways with the same seed, one without an observer and one "
        "with, called in alternating rounds. CPU time per call is the steadier figure on a shared machine. Over "
        "HTTP the same cost is a small share of the server's work per request (see the server CPU per call in "
        "[HTTP gateway](#http-gateway)).",
        lambda o: ["-m", "benchmarks.metrics_overhead", *(["--quick"] * o.quick)],
        render_metrics,
    ),
]


# -- running ----------------------------------------------------------------------------------------
@dataclass
class Outcome:
    bench: Bench
    command: str = ""
    ran: bool = False
    seconds: float = 0.0
    returncode: int | None = None
    error: str | None = None
    lines: Lines = field(default_factory=list)


def wrap(text: str, indent: str = "") -> str:
    """Prose wrapped like the rest of the docs (the Markdown renders the same either way)."""
    return textwrap.fill(text, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def wrap_prose(md: str) -> str:
    """``wrap`` for every paragraph of a rendered section that is not a table or a command line."""
    blocks = md.split("\n\n")
    return "\n\n".join(b if b.startswith(("|", "`", "#")) else wrap(" ".join(b.split("\n"))) for b in blocks)


def progress(msg: str) -> None:
    print(f"[report] {msg}", file=sys.stderr, flush=True)


def scrub(text: str, scratch: Path) -> str:
    """No absolute path of this machine goes into the page: the repository and scratch folders by name,
    any other absolute path shortened to its last part."""
    text = text.replace(str(scratch), "$TMP").replace(str(ROOT), ".")
    return re.sub(r"(?<![\w.])/(?:[\w.+-]+/)+", "…/", text)


def shown(argv: list[str], scratch: Path) -> str:
    return scrub(
        shlex.join(
            [
                "python",
                *(
                    os.path.relpath(a, ROOT)
                    if os.path.isabs(a) and Path(a).exists() and not a.startswith(str(scratch))
                    else a
                    for a in argv
                ),
            ]
        ),
        scratch,
    )


def run_one(b: Bench, o: Options, timeout: float) -> Outcome:
    res = Outcome(b)
    try:
        argv = b.argv(o)
    except FileNotFoundError as exc:
        res.ran, res.error = True, str(exc)
        return res
    res.command, res.ran = shown(argv, o.out), True
    tail: collections.deque[str] = collections.deque(maxlen=12)
    stdout: list[str] = []
    started = time.monotonic()
    # A session of its own, so a timeout ends the program and every process it started.
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def pump_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            tail.append(line.rstrip())
            print(f"    {line.rstrip()}", file=sys.stderr, flush=True)

    def pump_out() -> None:
        assert proc.stdout is not None
        stdout.extend(proc.stdout)

    threads = [threading.Thread(target=pump_err, daemon=True), threading.Thread(target=pump_out, daemon=True)]
    for t in threads:
        t.start()
    try:
        res.returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        res.error = f"did not finish within {timeout:.0f} s and was stopped"
    for t in threads:
        t.join(10)
    res.seconds = time.monotonic() - started
    lines = [json.loads(x) for x in stdout if x.startswith("{")]
    if res.error is None and res.returncode != 0:
        last = next((x for x in reversed(tail) if x.strip()), "no message on stderr")
        res.error = f"exited with code {res.returncode}: {scrub(last.strip(), o.out)}"
    try:
        res.lines = b.collect(lines, o)
    except (OSError, ValueError) as exc:
        res.error = res.error or f"its output could not be read: {exc}"
    return res


# -- the page ---------------------------------------------------------------------------------------
def machine(store: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "system": platform.system(),
        "arch": platform.machine(),
    }
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["cpu_model"] = model.group(1).strip() if model else None
        mem = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        info["ram_gib"] = round(int(mem.group(1)) / 1024 / 1024, 1) if mem else None
    except OSError:
        pass
    try:
        release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
        info["os"] = release.get("PRETTY_NAME", "").strip('"') or platform.platform()
    except OSError:
        info["os"] = platform.platform()
    info["kernel"] = platform.release()
    if hasattr(os, "getloadavg"):
        info["load"] = round(os.getloadavg()[0], 1)
    try:
        import psycopg

        with psycopg.connect(store, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            info["postgresql"] = row[0] if row else None
    except Exception as exc:  # noqa: BLE001 - the PostgreSQL sections say why they failed; here only a version
        info["postgresql"] = f"not reachable ({type(exc).__name__})"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    info["commit"] = git("rev-parse", "--short=12", "HEAD") or "unknown"
    info["dirty"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    return info


def render_header(
    info: dict[str, Any], started: dt.datetime, seconds: float, command: str, outcomes: list[Outcome]
) -> str:
    cpu = f"{info.get('cpus')} CPUs" + (f" ({info['cpu_model']})" if info.get("cpu_model") else "")
    ram = f", {info['ram_gib']} GiB RAM" if info.get("ram_gib") else ""
    load = f", load average {info['load']} when the run started" if "load" in info else ""
    commit = f"`{info['commit']}`" + (" with uncommitted changes" if info.get("dirty") else "")
    ran = [o.bench.key for o in outcomes if o.ran]
    failed = [o.bench.key for o in outcomes if o.error]
    out = [
        "## The benchmark run",
        "",
        wrap(
            "Everything from here to the end of the page is written by `python -m benchmarks.report` from one run; "
            "edit the program, not this text."
        ),
        "",
        wrap(f"- **Date**: {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min in all.", "  "),
        wrap(
            f"- **Machine**: {cpu}{ram}, {info.get('os')} ({info.get('system')} {info.get('kernel')}, "
            f"{info.get('arch')}){load}.",
            "  ",
        ),
        wrap(
            f"- **Software**: Python {info.get('python')}, SQLite {info.get('sqlite')}, PostgreSQL "
            f"{info.get('postgresql')} (local server), git commit {commit}.",
            "  ",
        ),
        f"- **Command**: `{command}`",
        wrap(
            f"- **Benchmarks run**: {', '.join(ran) or 'none'}"
            + (f"; **failed**: {', '.join(failed)}" if failed else "")
            + ".",
            "  ",
        ),
        "",
        wrap(
            "**Read the ratios.** The development machine is a shared 2-core VM: other work moves an absolute "
            "figure by ±30–50 % from run to run. A ratio compares two things measured side by side in the same "
            "run (ours against the peer, PostgreSQL against SQLite, attached against nothing attached, with "
            "against without the observer) and is what these tables are for; compare absolute numbers only "
            "between runs on the same quiet machine."
        ),
    ]
    return "\n".join(out)


def render_section(o: Outcome, why_not: str) -> str:
    b = o.bench
    out = [f"## {b.title}", "", wrap(b.about), ""]
    if not o.ran:
        out.append(f"*Not run in this run ({why_not}).*")
        return "\n".join(out)
    out.append(f"`{o.command}` ({o.seconds:.0f} s)" if o.command else "")
    out.append("")
    if o.error:
        out.append(wrap(f"**Failed in this run**: {o.error}."))
    if o.lines:
        try:
            out += ["", wrap_prose(b.render(o.lines))] if o.error else [wrap_prose(b.render(o.lines))]
        except Exception as exc:  # noqa: BLE001 - a partial or unexpected output: say so, keep the other sections
            out.append(f"**Its output could not be rendered**: {type(exc).__name__}: {exc}.")
    elif not o.error:
        out.append("**It printed no results.**")
    return "\n".join(line for line in out).rstrip()


def render_report(header: str, sections: list[str]) -> str:
    return "\n\n".join([header, *sections]) + "\n"


def replace_region(page: str, generated: str) -> str:
    """The page with everything between the markers replaced (the markers added at the end if missing)."""
    start, end = page.find(BEGIN), page.find(END)
    if start == -1 and end == -1:
        return page.rstrip("\n") + f"\n\n{BEGIN}\n{generated.strip()}\n{END}\n"
    if start == -1 or end == -1 or end < start or page.count(BEGIN) > 1 or page.count(END) > 1:
        raise ValueError(f"{PAGE.name}: expected one {BEGIN} followed by one {END}")
    return page[: start + len(BEGIN)] + "\n" + generated.strip() + "\n" + page[end:]


def sections_of(region: str) -> tuple[str, dict[str, str]]:
    """The generated region's header (its first ``## `` section) and its other sections by title."""
    parts = re.split(r"(?m)^(?=## )", region.strip())
    parts = [p.strip() for p in parts if p.strip()]
    if not parts:
        return "", {}
    return parts[0], {p.splitlines()[0][3:].strip(): p for p in parts[1:]}


def merged(page: str, header: str, outcomes: list[Outcome], note: str, why_not: str) -> str:
    """The generated part for ``--merge``: the page's header and the sections not run as they are, the
    sections run rewritten, each with ``note`` (when and how it ran) under its description."""
    start, end = page.find(BEGIN), page.find(END)
    old_header, old = sections_of(page[start + len(BEGIN) : end] if 0 <= start < end else "")
    out = [old_header or header]
    for o in outcomes:
        if not o.ran:
            out.append(old.get(o.bench.title, render_section(o, why_not)))
            continue
        heading, about, rest = (render_section(o, why_not).split("\n\n", 2) + ["", ""])[:3]
        out.append("\n\n".join(x for x in (heading, about, wrap(note), rest) if x))
    return render_report(out[0], out[1:])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    keys = [b.key for b in BENCHES]
    p.add_argument("--quick", action="store_true", help="each program's quick mode (a smoke run, minutes)")
    p.add_argument("--only", help=f"comma list of: {','.join(keys)}")
    p.add_argument("--skip", help="comma list of benchmarks to leave out")
    p.add_argument(
        "--peer",
        default=str(PEER_HARNESS),
        help="the peer harness (default: benchmarks/peer/openclaw/run.sh, which installs OpenClaw on first use)",
    )
    p.add_argument(
        "--store",
        default=os.environ.get("SESSIONWATCH_BENCH_PG", PG_DEFAULT),
        help="PostgreSQL server URL for the PostgreSQL benchmarks (fresh databases are created)",
    )
    p.add_argument("--timeout", type=float, default=3600, help="seconds one program may run before it is stopped")
    p.add_argument("--page", default=str(PAGE), help="the page to rewrite")
    p.add_argument("--stdout", action="store_true", help="print the generated part instead of rewriting the page")
    p.add_argument(
        "--merge",
        action="store_true",
        help="with --only: rewrite only the sections run, keeping the page's header and other sections as they "
        "are; each section run says when and how it ran",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    keys = [b.key for b in BENCHES]
    a = p.parse_args(argv)
    only = set(a.only.split(",")) if a.only else set(keys)
    skip = set(a.skip.split(",")) if a.skip else set()
    unknown = (only | skip) - set(keys)
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))} (known: {', '.join(keys)})")
    why_not = "`--only`" if a.only else "`--skip`"
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    info = machine(a.store)
    command = shlex.join(["python", "-m", "benchmarks.report", *(sys.argv[1:] if argv is None else argv)])
    outcomes: list[Outcome] = []
    chosen = [b for b in BENCHES if b.key in only and b.key not in skip]
    with tempfile.TemporaryDirectory(prefix="sw-report-") as tmp:
        o = Options(quick=a.quick, peer=a.peer, store=a.store, out=Path(tmp))
        for b in BENCHES:
            if b not in chosen:
                outcomes.append(Outcome(b))
                continue
            progress(f"{chosen.index(b) + 1}/{len(chosen)} {b.key}: {b.title}")
            res = run_one(b, o, a.timeout)
            outcomes.append(res)
            state = f"FAILED: {res.error}" if res.error else "ok"
            progress(f"{b.key}: {state} ({res.seconds:.0f} s; {time.monotonic() - t0:.0f} s so far)")
        command = scrub(command, o.out)
    header = render_header(info, started, time.monotonic() - t0, command, outcomes)
    page = Path(a.page)
    if a.merge:
        load = f", load average {info['load']} when it started" if "load" in info else ""
        note = (
            f"*This section comes from a run of its own after the one above: `{command}` on "
            f"{started:%Y-%m-%d %H:%M} UTC, {info.get('cpus')} CPUs{load} (the next full run of the report "
            "replaces it like every other section).*"
        )
        generated = merged(page.read_text(), header, outcomes, note, why_not)
    else:
        generated = render_report(header, [render_section(x, why_not) for x in outcomes])
    if a.stdout:
        print(generated)
    else:
        page.write_text(replace_region(page.read_text(), generated))
        progress(f"wrote {os.path.relpath(page, ROOT)}")
    failed = [x.bench.key for x in outcomes if x.error]
    if failed:
        progress(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
