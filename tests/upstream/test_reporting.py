"""What adoption and a tick say about links the monitor does not scan.

The monitor scans only sessions some session watches. Adopting a thread onto a session nobody watches
says so and shows the ``watch`` command (Python, HTTP and CLI); a tick lists every link, and each one it
did not scan carries the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from sessionwatch.http.app import create_app
from tests.support.ports import ServerThread

from .conftest import WATCHER, Harness
from .writers import ClaudeTranscript


def test_adopting_an_unwatched_session_says_the_monitor_will_not_scan_it(any_harness: Harness):
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    res = h.gw.continue_thread("claude", t.session_id)
    key = res["sessionKey"]
    assert res["linked"] and res["watched"] is False
    assert "scans only watched sessions" in res["note"]
    assert f"sessionwatch watch {key} --as <WATCHER>" in res["note"]
    h.gw.put_session(WATCHER)
    h.gw.watch(WATCHER, key)
    again = h.gw.continue_thread("claude", t.session_id)
    assert again["watched"] is True and "note" not in again


def test_adopt_note_over_http(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    with ServerThread(create_app(harness.gw), lifespan="on") as srv:
        r = httpx.post(f"{srv.url}/v1/catalogs/claude/threads/{t.session_id}/continue", json={}, timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["watched"] is False and f"sessionwatch watch {body['sessionKey']} --as" in body["note"]


def test_adopt_note_in_the_cli(tmp_path: Path, roots: tuple[Path, Path]):
    claude, codex = roots
    t = ClaudeTranscript(claude)
    t.prompt("history")
    exe = Path(sys.executable).with_name("sessionwatch")  # the command installed beside this interpreter
    env = {
        "PATH": str(exe.parent),
        "HOME": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(claude),
        "CODEX_HOME": str(codex),
        "COLUMNS": "400",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    out = subprocess.run(
        [str(exe), "--store", f"sqlite:///{tmp_path}/cli.db", "adopt", "claude", t.session_id],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out
    key = f"agent:main:claude:{t.session_id}"
    assert "monitor scans only watched sessions" in out.stdout
    assert f"sessionwatch watch {key} --as <WATCHER>" in " ".join(out.stdout.split())
    tick = subprocess.run(
        [str(exe), "--store", f"sqlite:///{tmp_path}/cli.db", "tick"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert tick.returncode == 0 and "not watched" in tick.stdout, tick


def test_tick_reports_every_link_with_the_reason_it_was_skipped(any_harness: Harness):
    h = any_harness
    scanned, unwatched, busy = (ClaudeTranscript(h.claude_root, cwd=f"/home/dev/{n}") for n in ("a", "b", "c"))
    k_scanned = h.adopt("claude", scanned.session_id)
    k_unwatched = h.adopt("claude", unwatched.session_id, watcher=None)
    k_busy = h.adopt("claude", busy.session_id)
    h.gw.begin_run(k_busy, "run-1")
    for t in (scanned, unwatched, busy):
        t.prompt("typed")
    res = h.tick()
    assert {e["sessionKey"] for e in res["links"]} == {k_scanned, k_unwatched, k_busy}
    assert h.entry(res, k_scanned)["status"] == "recorded"
    skipped = h.entry(res, k_unwatched)
    assert skipped["status"] == "skipped" and "not watched" in skipped["reason"]
    assert "sessionwatch watch" in skipped["reason"]
    deferred = h.entry(res, k_busy)
    assert deferred["status"] == "deferred" and deferred["reason"] == "active run"


def test_a_tick_locked_out_by_another_gateway_lists_the_links_it_left(store_url: str, roots: tuple[Path, Path]):
    if not store_url.startswith("postgres"):
        pytest.skip("the cross-gateway tick lock is PostgreSQL's (SQLite serves one gateway)")
    h = Harness(store_url, ManualClock(), *roots)
    other = Gateway.open(store_url, clock=h.clock)
    try:
        t = ClaudeTranscript(h.claude_root)
        key = h.adopt("claude", t.session_id)
        guard = other.store.try_lock("upstream-monitor")
        assert guard is not None
        with guard:
            res = h.gw.upstream_tick()
        assert res["status"] == "busy" and "another gateway" in res["reason"]
        entry = h.entry(res, key)
        assert entry["status"] == "skipped" and "another gateway" in entry["reason"]
        assert h.entry(h.gw.upstream_tick(), key)["status"] == "unchanged"
    finally:
        other.close()
        h.close()
