"""A prompt behind a large backlog is found in the first tick, with memory bounded by the window.

A tick keeps reading 1 MiB windows of a grown transcript while its time budget lasts (5 s by default;
the provider timeout is 45 s), one window in memory at a time. Before, a tick read one window, so a
prompt behind 200 MB of tool output waited for the 201st tick (3.4 hours at the 60 s cadence).
"""

from __future__ import annotations

import time
import tracemalloc
import uuid

import pytest

from sessionwatch import Settings
from sessionwatch.clock import ManualClock
from sessionwatch.errors import InvalidArgument

from .conftest import Harness, done_at
from .writers import ClaudeTranscript, js_line

MB = 1_000_000


def tool_output_block(t: ClaudeTranscript, size: int = 1 << 20) -> bytes:
    """About ``size`` bytes of what a busy session writes: tool calls and their ~64 KB results."""
    rows: list[bytes] = []
    n = 0
    i = 0
    while n < size:
        tid = f"toolu_{uuid.uuid4().hex[:24]}"
        call = t.entry(
            "assistant",
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [
                    {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"cat build-{i}.log"}}
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
        output = "".join(f"[{i:05d}:{k:04d}] compiling module_{k}.py ... ok\n" for k in range(1400))
        result = t.entry(
            "user",
            {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": output}]},
            toolUseResult={"stdout": output, "stderr": "", "interrupted": False},
        )
        for row in (js_line(call), js_line(result)):
            rows.append(row)
            n += len(row)
        i += 1
    return b"".join(rows)


@pytest.mark.slow
def test_a_prompt_behind_200_mb_of_tool_output_is_recorded_in_the_first_tick(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    t.prompt("history before adoption")
    key = harness.adopt("claude", t.session_id)
    block = tool_output_block(t)
    with open(t.path, "ab") as fh:
        while fh.tell() < 200 * MB:
            fh.write(block)
    t.prompt("the question behind the backlog")
    size = t.size()
    assert size > 200 * MB

    tracemalloc.start()
    try:
        started = time.perf_counter()
        res = harness.entry(harness.tick(), key)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(
        f"\nbacklog: {size / MB:.0f} MB scanned in one tick in {elapsed:.2f} s "
        f"({size / MB / elapsed:.0f} MB/s under tracemalloc), peak traced memory {peak / MB:.1f} MB"
    )
    assert res["status"] == "recorded" and res["humanTurns"] == 1, res
    assert done_at(harness.gw.link(key)["marker"]) == size
    assert peak < 16 * MB  # a few windows' worth, not the file
    assert harness.entry(harness.tick(), key)["status"] == "unchanged"


def test_without_budget_every_file_still_gets_a_window_per_tick(tmp_path, roots):
    """The budget is shared by the files of one catalog; a file behind another's backlog still moves."""
    h = Harness(
        f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(scan_window_bytes=8192), scan_budget_s=0
    )
    try:
        big = ClaudeTranscript(h.claude_root, cwd="/home/dev/big")
        small = ClaudeTranscript(h.claude_root, cwd="/home/dev/small")
        k_big, k_small = h.adopt("claude", big.session_id), h.adopt("claude", small.session_id)
        big.append_bytes(tool_output_block(big, 200_000))
        big.prompt("behind the backlog")
        small.prompt("typed in the small one")
        res = h.tick()
        assert h.entry(res, k_small)["status"] == "recorded"
        assert h.entry(res, k_big)["status"] == "advanced"  # one window of its backlog
        assert 0 < done_at(h.gw.link(k_big)["marker"]) < big.size()
        h.gw.upstream.configure(scan_budget_s=30)
        assert h.entry(h.tick(), k_big)["status"] == "recorded"  # the rest in one tick
    finally:
        h.close()


def test_a_marker_from_before_file_identities_is_trusted_once_and_learned(any_harness: Harness):
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    t.prompt("history")
    key = h.adopt("claude", t.session_id)
    link = h.gw.store.get_link(key, "main")
    assert h.gw.store.advance_link(key, "main", link.updated_at, {"offset": t.size()}, h.clock())
    t.prompt("typed after the upgrade")
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 1
    marker = h.gw.link(key)["marker"]
    assert marker["offset"] == t.size() and marker["file"]["ino"] == t.path.stat().st_ino


def test_the_scan_budget_is_checked(harness: Harness):
    with pytest.raises(InvalidArgument):
        harness.gw.upstream.configure(scan_budget_s=-1)
    with pytest.raises(InvalidArgument):
        harness.gw.upstream.configure(scan_budget_s=60)


def test_a_legacy_marker_past_the_budget_still_progresses(harness: Harness):
    """Learning a legacy marker's identity reads its prefix; with no budget left the scan goes on without
    it (one window), and learns it in a tick with time to spare."""
    t = ClaudeTranscript(harness.claude_root)
    t.prompt("history")
    key = harness.adopt("claude", t.session_id)
    link = harness.gw.store.get_link(key, "main")
    assert harness.gw.store.advance_link(key, "main", link.updated_at, {"offset": t.size()}, harness.clock())
    t.prompt("typed")
    harness.gw.upstream.configure(scan_budget_s=0)  # the deadline has passed before the file is opened
    assert harness.entry(harness.tick(), key)["status"] == "recorded"
    assert "file" not in harness.gw.link(key)["marker"]
    harness.gw.upstream.configure(scan_budget_s=5)
    t.prompt("typed again")
    assert harness.entry(harness.tick(), key)["status"] == "recorded"
    assert "file" in harness.gw.link(key)["marker"] and harness.human_turns(key) == 2
