"""benchmarks.report: JSON lines become the page's sections, and only the marked region of the page changes.

No benchmark runs here: the renderers get sample lines in the programs' shapes, and the end-to-end case
runs two stand-in programs (one prints a result, one fails)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchmarks import report as report_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return report_module


def bench(report: ModuleType, key: str) -> object:
    return next(b for b in report.BENCHES if b.key == key)


def test_http_lines_become_the_http_section(report: ModuleType) -> None:
    lines = [
        {
            "op": "http_session_status_changes_since",
            "n": 20000,
            "per_sec": 6692.4,
            "p50_us": 1003.2,
            "p99_us": 2310.0,
            "errors": 0,
            "connections": 8,
            "sse_subscribers": 100,
            "server_cpu_us_per_req": 120.5,
        },
        {"op": "http_sessions_send", "n": 20000, "per_sec": 7891.0, "p50_us": 800.0, "p99_us": 1800.0, "errors": 0},
        {"op": "python_session_status_changes_since", "n": 20000, "per_sec": 15782.0, "p50_us": 61.0, "errors": 0},
        {"op": "python_sessions_send", "n": 20000, "per_sec": 20936.0, "p50_us": 37.0, "errors": 0},
        {"op": "ratio", "meta": True},
    ]
    out = report.Outcome(
        bench(report, "http"), command="python -m benchmarks.http_load", ran=True, seconds=61, returncode=0, lines=lines
    )
    md = report.render_section(out, "`--only`")
    assert md.startswith("## HTTP gateway\n")
    assert "`python -m benchmarks.http_load` (61 s)" in md
    assert "| `session_status` + `changesSince` | 6,692 | 1,003.2 | 2,310.0 | 120.5 | 15,782 | 61.0 | 2.4× |" in md
    assert "| `sessions_send` | 7,891 | 800.0 | 1,800.0 | – | 20,936 | 37.0 | 2.7× |" in md
    assert "100 SSE subscribers connected; errors: 0" in md
    assert "Failed" not in md


def test_peer_lines_become_the_ratio_table(report: ModuleType) -> None:
    lines = [
        {
            "op": "info",
            "meta": True,
            "openclaw_version": "2026.9.6",
            "node": "v24.21.0",
            "sqlite_version": "3.50.4",
            "side": "peer",
        },
        {"op": "append_w0", "n": 2000, "seconds": 0.34, "per_sec": 5927.0, "p50_us": 127.1, "side": "peer"},
        {"op": "sweep_after_restart", "n": 100, "seconds": 0.5, "per_sec": 200.0, "side": "peer"},
        {"op": "info", "meta": True, "sqlite_version": "3.40.1", "side": "ours"},
        {"op": "append_w0", "n": 2000, "seconds": 0.1, "per_sec": 20807.8, "p50_us": 31.9, "side": "ours"},
        {"op": "sweep_after_restart", "n": 100, "seconds": 0.05, "per_sec": 2000.0, "side": "ours"},
        {"op": "raw_insert_baseline", "n": 2000, "per_sec": 21316.3, "p50_us": 29.8, "side": "ours"},
        {"op": "hook-latency", "case": "manager, nothing pending", "p50_ms": 80.2, "p95_ms": 95.0, "side": "ours"},
    ]
    md = report.render_section(
        report.Outcome(
            bench(report, "peer"), command="python -m benchmarks.compare", ran=True, returncode=0, lines=lines
        ),
        "",
    )
    assert md.startswith("## Engine vs the peer (OpenClaw)\n")
    assert "OpenClaw 2026.9.6 on Node v24.21.0" in md
    assert "| `append_w0` | 5927.0 | 20807.8 | 127.1 | 31.9 | 3.5× | ≥ 3 (throughput) | yes |" in md
    assert "| `sweep_after_restart` | 200.0 | 2000.0 |  |  | 10.0× | ≥ 2 (time speed-up) | yes |" in md
    assert "98% of raw" in md
    assert "manager, nothing pending" not in md  # the hooks have their own section


def test_hook_and_mcp_lines_become_one_table_each_with_the_floor_and_the_ratios(report: ModuleType) -> None:
    floor = {"floor_p50_ms": 20.0, "floor_p95_ms": 40.0}
    lines = [
        {"op": "run", "meta": True},
        {
            "op": "hook-latency",
            "case": "manager, one notice every other run",
            "mode": "local",
            "runs": 40,
            "p50_ms": 45.0,
            "p95_ms": 100.0,
            **floor,
            "ratio_to_floor_p50": 2.25,
            "ratio_to_floor_p95": 2.5,
            "cpu_p95_ms": 31.9,
            "target": "p95 ≤ 3× floor",
            "within": True,
        },
        {
            "op": "hook-latency",
            "case": "a gateway remembered as down",
            "mode": "gateway",
            "p50_ms": 40.0,
            "p95_ms": 60.0,
            **floor,
            "ratio_to_floor_p50": 2.0,
            "ratio_to_floor_p95": 1.5,
            "target": "p95 ≤ 50 ms",
            "within": False,
        },
        {
            "op": "hook-latency",
            "case": "Claude Code HTTP hook",
            "mode": "gateway",
            "p50_ms": 3.0,
            "p95_ms": 9.0,
            **floor,
            "server_cpu_ms_per_event": 2.5,
            "target": "p95 ≤ 20 ms added",
            "within": True,
        },
        {"op": "hook-floor", "case": "python -c pass, interleaved (all cases)", "p50_ms": 20.0, "p95_ms": 40.0},
        {"op": "hook-latency-budget", "load_average": 3.14, "cores": 2},
        {
            "op": "mcp-start",
            "host": "codex",
            "quick_start": True,
            "budget_ms": 300.0,
            "tools_listed": {"runs": 20, "p50_ms": 130.0, "p95_ms": 200.0},
            "cpu_p50_ms": 110.0,
            "within": True,
            **floor,
            "ratio_to_floor_p50": 6.5,
            "ratio_to_floor_p95": 5.0,
        },
        {
            "op": "mcp-start",
            "host": "codex",
            "quick_start": False,
            "budget_ms": 300.0,
            "tools_listed": {"runs": 20, "p50_ms": 900.0, "p95_ms": 1000.0},
            "cpu_p50_ms": 950.0,
            "within": False,
            **floor,
            "ratio_to_floor_p50": 45.0,
            "ratio_to_floor_p95": 25.0,
        },
    ]
    md = report.render_section(
        report.Outcome(bench(report, "hooks"), command="python -m benchmarks.engine", ran=True, lines=lines), ""
    )
    assert md.startswith("## Hooks and MCP start-up\n")
    row = "| manager, one notice every other run | local store | 45.0 | 100.0 | 20.0 | 40.0 | 2.25× | 2.50× | 31.9 |"
    assert row + " p95 ≤ 3× floor | yes |" in md
    assert "| a gateway remembered as down | gateway | 40.0 | 60.0 | 20.0 | 40.0 | 2.00× | 1.50× | – |" in md
    assert "| p95 ≤ 50 ms | **no** |" in md
    assert "Load average 3.1 on 2 cores" in md
    assert "The gateway's own CPU time per HTTP hook event: 2.50 ms" in md
    assert "| codex | yes | 130.0 | 200.0 | 20.0 | 40.0 | 6.50× | 5.00× | 110.0 | p95 ≤ 300 ms | yes |" in md
    assert "| codex | no | 900.0 | 1,000.0 | 20.0 | 40.0 | 45.00× | 25.00× | 950.0 | – | – |" in md  # the old path


def test_merge_rewrites_the_sections_run_and_keeps_the_others(report: ModuleType, tmp_path: Path) -> None:
    """``--merge``: the page's header and the sections not run stay as they are; a section run is rewritten
    and says when it ran; a section the page did not have yet takes its place in the list."""
    page = (
        f"# Benchmarks\n\n{report.BEGIN}\n## The benchmark run\n\nold header\n\n## HTTP gateway\n\nold http\n\n"
        f"## Upstream monitor\n\nold upstream\n{report.END}\n"
    )
    outcomes = [report.Outcome(b) for b in report.BENCHES]
    for o in outcomes:
        if o.bench.key in ("hooks", "upstream"):
            o.ran, o.command, o.lines = True, "python -m x", []
            o.error = "exited with code 1: stand-in"
    out = report.merged(page, "new header", outcomes, "*This section comes from a run of its own.*", "`--only`")
    assert out.startswith("## The benchmark run\n\nold header\n\n")
    assert "## HTTP gateway\n\nold http" in out and "old upstream" not in out
    hooks, upstream = out.index("## Hooks and MCP start-up"), out.index("## Upstream monitor")
    assert out.index("## HTTP gateway") > hooks and upstream > hooks
    assert out.count("*This section comes from a run of its own.*") == 2
    assert "*Not run in this run (`--only`).*" in out  # a section neither run nor on the page


def test_a_failed_or_skipped_benchmark_keeps_its_heading_and_says_so(report: ModuleType) -> None:
    failed = report.Outcome(
        bench(report, "dashboard"),
        command="python -m benchmarks.dashboard_overhead",
        ran=True,
        returncode=1,
        error="exited with code 1: RuntimeError: the dashboard was not ready",
    )
    md = report.render_section(failed, "")
    assert md.startswith("## Dashboard overhead\n")
    assert "**Failed in this run**: exited with code 1: RuntimeError: the dashboard was not ready." in md
    skipped = report.render_section(report.Outcome(bench(report, "pg")), "`--skip`")
    assert skipped.startswith("## PostgreSQL vs SQLite\n") and "*Not run in this run (`--skip`).*" in skipped


def test_only_the_marked_region_is_replaced(report: ModuleType) -> None:
    before = "# Benchmarks\n\nGrowth text, kept.\n\n"
    after = "\n\nA closing line outside the markers, kept.\n"
    page = before + f"{report.BEGIN}\nold generated text\n{report.END}" + after
    new = report.replace_region(page, "## The benchmark run\n\nnew text\n")
    assert new == before + f"{report.BEGIN}\n## The benchmark run\n\nnew text\n{report.END}" + after
    assert report.replace_region(new, "again") == before + f"{report.BEGIN}\nagain\n{report.END}" + after
    # no markers yet: they are added at the end; a broken pair is refused rather than guessed at
    assert report.replace_region("# Page\n", "x") == f"# Page\n\n{report.BEGIN}\nx\n{report.END}\n"
    with pytest.raises(ValueError):
        report.replace_region(f"{report.END}\n{report.BEGIN}\n", "x")


def test_a_run_writes_every_section_and_fails_when_one_program_fails(
    report: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok = json.dumps({"op": "upstream_tick_unchanged", "n": 1000, "seconds": 0.05, "best_seconds": 0.04, "ok": True})
    stand_ins = {
        "upstream": ["-c", f"print({ok!r})"],
        "metrics": ["-c", "import sys; print('boom: no observer', file=sys.stderr); sys.exit(3)"],
    }
    benches = [
        report.Bench(b.key, b.title, b.about, (lambda o, argv=stand_ins[b.key]: argv), b.render)
        for b in report.BENCHES
        if b.key in stand_ins
    ]
    monkeypatch.setattr(report, "BENCHES", [*benches, bench(report, "http")])
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nkept\n\n{report.BEGIN}\nstale figures\n{report.END}\n")
    with socket.socket() as s:  # a port nothing listens on: the PostgreSQL version reads "not reachable"
        s.bind(("127.0.0.1", 0))
        store = f"postgresql://postgres@127.0.0.1:{s.getsockname()[1]}/postgres"
    code = report.main(["--skip", "http", "--page", str(page), "--store", store])
    text = page.read_text()
    assert code == 1
    assert text.startswith(f"# Benchmarks\n\nkept\n\n{report.BEGIN}\n## The benchmark run\n")
    assert text.endswith(f"{report.END}\n") and "stale figures" not in text
    assert "- **Command**: `python -m benchmarks.report --skip http --page" in text
    assert "- **Benchmarks run**: upstream, metrics; **failed**: metrics." in text
    assert (
        "| one tick over 1,000 watched, unchanged transcripts | 0.050 s median (best 0.040 s) | < 0.50 s | yes |"
        in text
    )
    assert "**Failed in this run**: exited with code 3: boom: no observer." in text
    assert "## HTTP gateway" in text and "*Not run in this run (`--skip`).*" in text
    assert str(tmp_path) not in text.split("- **Command**")[0]  # the machine's paths stay out of the prose
    assert sys.executable not in text


def test_a_program_past_the_timeout_is_stopped_and_reported(
    report: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-in starts a child of its own that would outlive it: the whole process group is stopped.
    sleeper = [
        "-c",
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); print('started', file=sys.stderr, flush=True); time.sleep(60)",
    ]
    up = bench(report, "upstream")
    monkeypatch.setattr(report, "BENCHES", [report.Bench(up.key, up.title, up.about, lambda o: sleeper, up.render)])
    options = report.Options(quick=False, peer="", store="", out=tmp_path)
    outcome = report.run_one(report.BENCHES[0], options, timeout=1)
    assert outcome.error == "did not finish within 1 s and was stopped"
    assert outcome.seconds < 8  # not 60 s, nor the 10 s wait for pipes a surviving child would hold open
    md = report.render_section(outcome, "")
    assert "**Failed in this run**: did not finish within 1 s and was stopped." in md
