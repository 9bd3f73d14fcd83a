"""Local Claude and Codex transcripts through the whole monitor: adoption baselines, growth, partial
rows, CRLF, oversized rows, and files that disappear, shrink or stop being files."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import pytest

from sessionwatch import Settings
from sessionwatch.clock import ManualClock

from .conftest import Harness, done_at
from .writers import ClaudeTranscript, CodexRollout, js_line


def test_adoption_baseline_skips_history_and_counts_only_new_human_rows(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    t.prompt("history: typed before adoption")
    t.assistant("history answer")
    key = harness.adopt("claude", t.session_id)
    link = harness.gw.link(key)
    assert done_at(link["marker"]) == t.size() and link["upstreamRef"] == {"filePath": str(t.path)}
    assert harness.entry(harness.tick(), key)["status"] == "unchanged"  # stat only, nothing new
    t.assistant("still thinking")
    t.tool_result("tool output")
    assert harness.entry(harness.tick(), key)["status"] == "advanced"  # marker moved, nothing recorded
    assert harness.events(key, "human_direct_message") == []
    t.prompt("a person typed this")
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 1
    (ev,) = harness.events(key, "human_direct_message")
    assert ev["summary"] == "human message via claude" and ev["actorType"] == "human" and "payload" not in ev
    assert done_at(harness.gw.link(key)["marker"]) == t.size()


def test_baseline_stops_before_a_row_still_being_written(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    t.prompt("history")
    complete = t.size()
    line = js_line(t.entry("user", {"role": "user", "content": "typed while adopting"}, promptSource="typed"))
    t.append_bytes(line[:25])  # the CLI is mid-append
    key = harness.adopt("claude", t.session_id)
    assert done_at(harness.gw.link(key)["marker"]) == complete
    assert harness.entry(harness.tick(), key)["status"] == "unchanged"  # partial row waits
    t.append_bytes(line[25:])
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1


def test_partial_trailing_lines_crlf_and_invalid_rows(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    row = js_line(t.entry("user", {"role": "user", "content": "first"}, promptSource="typed"))
    t.append_bytes(b"{not json at all}\n" + row[:-1] + b"\r\n")
    second = js_line(t.entry("user", {"role": "user", "content": "second"}, promptSource="typed"))
    t.append_bytes(second[:10])
    res = harness.entry(harness.tick(), key)
    assert res["humanTurns"] == 1
    assert harness.gw.link(key)["marker"]["offset"] == t.size() - 10
    t.append_bytes(second[10:])
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1
    assert harness.human_turns(key) == 2


def test_burst_is_one_event_with_turns_and_one_notice(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("one")
    t.assistant("a")
    t.prompt("two", source="queued")
    t.prompt("three")
    t.meta("<system-reminder>not a person</system-reminder>")
    harness.tick()
    (ev,) = harness.events(key, "human_direct_message")
    assert ev["payload"] == {"turns": 3}
    (notice,) = harness.notices()
    assert notice["text"] == (
        f'Session "{key}" changed (other actor). Reconcile before acting: session_status '
        f'sessionKey "{key}" changesSince 1.'
    )


def test_occurred_at_is_the_newest_counted_row_time(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    harness.clock.now = 1_800_000_000_000  # 2027-01-15T08:00:00Z; rows are stamped from 07:00:01
    t.prompt("one")
    t.prompt("two")
    harness.gw.upstream_tick()
    (ev,) = harness.events(key, "human_direct_message")
    assert ev["occurredAt"] == 1_799_996_402_000  # 07:00:02, the second row's time


def test_large_backlog_drains_over_ticks_without_skipping(tmp_path, roots):
    """With no time budget a tick reads one window per file: the marker carries the rest over ticks."""
    h = Harness(
        f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(scan_window_bytes=4096), scan_budget_s=0
    )
    try:
        t = ClaudeTranscript(h.claude_root)
        key = h.adopt("claude", t.session_id)
        for i in range(60):
            t.prompt(f"prompt number {i} " + "x" * 150)
            t.assistant("ok " * 20)
        ticks = 0
        while h.gw.link(key)["marker"]["offset"] < t.size():
            h.tick()
            ticks += 1
            assert ticks < 100
        assert ticks > 5 and h.human_turns(key) == 60
    finally:
        h.close()


def test_appends_while_scanning_count_every_human_row_once(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    rnd = random.Random(7)
    humans = 0
    lines: list[bytes] = []
    for i in range(300):
        kind = rnd.random()
        if kind < 0.3:
            lines.append(js_line(t.entry("user", {"role": "user", "content": f"human {i} ü"}, promptSource="typed")))
            humans += 1
        elif kind < 0.6:
            lines.append(
                js_line(t.entry("assistant", {"role": "assistant", "content": [{"type": "text", "text": "y" * 300}]}))
            )
        else:
            lines.append(
                js_line(
                    t.entry(
                        "user",
                        {
                            "role": "user",
                            "content": [
                                {"type": "tool_result", "tool_use_id": "t", "content": "z" * rnd.randint(1, 2000)}
                            ],
                        },
                    )
                )
            )
    done = threading.Event()

    def writer() -> None:
        with open(t.path, "ab", buffering=0) as fh:
            for line in lines:
                cut = rnd.randint(0, len(line))  # rows land in two writes: scans see partial rows
                fh.write(line[:cut])
                fh.write(line[cut:])
        done.set()

    th = threading.Thread(target=writer)
    th.start()
    while not done.is_set():
        harness.tick()
    th.join()
    for _ in range(3):
        harness.tick()
    assert harness.human_turns(key) == humans
    assert harness.gw.link(key)["marker"]["offset"] == t.size()


def test_row_longer_than_the_window_is_classified_across_ticks(harness: Harness):
    """A 1.2 MiB typed prompt with the default 1 MiB window: never blocks, counted exactly once (one
    window per tick here, so the parser state rides in the marker between ticks)."""
    harness.gw.upstream.configure(scan_budget_s=0)
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    big = "paste " * 210_000  # ~1.2 MiB
    t.prompt(big)
    t.prompt("and a short one after it")
    assert len(t.path.read_bytes()) > 1_200_000
    first = harness.entry(harness.tick(), key)
    assert first["status"] == "advanced" and first.get("note") == "oversized row"
    marker = harness.gw.link(key)["marker"]
    assert marker["offset"] == 1 << 20 and marker["row"]["start"] == 0
    assert len(json.dumps(marker)) < 4096
    second = harness.entry(harness.tick(), key)
    assert second["humanTurns"] == 2
    assert done_at(harness.gw.link(key)["marker"]) == t.size()
    assert harness.human_turns(key) == 2


def test_oversized_tool_result_is_not_human_and_does_not_block(harness: Harness):
    harness.gw.upstream.configure(scan_budget_s=0)  # one window per tick
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.tool_result("line of output\n" * 90_000)  # content and toolUseResult: ~2.9 MB in one row
    t.prompt("next question")
    statuses = [harness.entry(harness.tick(), key)["status"] for _ in range(4)]
    assert statuses == ["advanced", "advanced", "recorded", "unchanged"]  # 1 MiB per tick, then done
    assert harness.human_turns(key) == 1


def test_oversized_own_echo_is_recognized_by_digest(harness: Harness):
    """Our own ~0.7 MB prompt (newlines double in JSON) comes back in a >1 MiB row: not a person."""
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    own = ("step\n" * 140_000)[:700_000]
    harness.gw.put_session("agent:main:boss")
    harness.gw.inbound(key, own, channel="agent", provenance="inter_session", source_session_key="agent:main:boss")
    t.prompt(own.replace("\n", "\n\n"), source=None)  # whitespace differs: normalized equal
    for _ in range(3):
        harness.tick()
    assert harness.human_turns(key) == 0
    t.prompt(own + " but edited by a person", source=None)
    for _ in range(3):
        harness.tick()
    assert harness.human_turns(key) == 1


def test_oversized_rows_with_a_tiny_window(tmp_path, roots):
    """Many windows per row, the parser state riding in the marker, across a gateway restart too."""
    h = Harness(f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(scan_window_bytes=512))
    try:
        t = ClaudeTranscript(h.claude_root)
        key = h.adopt("claude", t.session_id)
        t.prompt("é😀 " * 900)  # ~5 KB, multi-byte characters cut at window edges
        t.tool_result("r" * 3000)
        t.prompt("x" * 2000, source="sdk")
        t.meta("m" * 2000)
        t.prompt("[Inter-session message] " + "i" * 2000, source=None)
        t.prompt("short")
        for n in range(80):
            if n == 10:
                h.restart()
            h.tick()
            if done_at(h.gw.link(key)["marker"]) == t.size():
                break
        assert done_at(h.gw.link(key)["marker"]) == t.size()
        assert h.human_turns(key) == 2
    finally:
        h.close()


def test_codex_local_rollouts(harness: Harness):
    r = CodexRollout(harness.codex_root)
    r.user_legacy("history before adoption")
    key = harness.adopt("codex", r.thread_id)
    link = harness.gw.link(key)
    assert link["upstreamKind"] == "codex-cli" and done_at(link["marker"]) == r.size()
    r.environment()
    r.user_legacy("legacy prompt")
    r.agent("done")
    r.user_paginated("paginated", "prompt")
    res = harness.entry(harness.tick(), key)
    assert res["humanTurns"] == 2
    (ev,) = harness.events(key, "human_direct_message")
    assert ev["summary"] == "human message via codex" and ev["payload"] == {"turns": 2}


def test_codex_self_echo_including_batched_steers(harness: Harness):
    r = CodexRollout(harness.codex_root)
    key = harness.adopt("codex", r.thread_id)
    harness.gw.put_session("agent:main:boss")
    for text in ("fix the flaky test", "then run lint"):
        harness.gw.inbound(key, text, channel="agent", provenance="inter_session", source_session_key="agent:main:boss")
    r.user_legacy("fix the  flaky test")
    r.user_paginated("fix the flaky test", "then run lint")  # two steers batched into one item
    harness.tick()
    assert harness.human_turns(key) == 0
    r.user_paginated("fix the flaky test", "and also deploy")
    harness.tick()
    assert harness.human_turns(key) == 1


def test_deleted_file_is_missing(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.path.unlink()
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "missing" and res["missCount"] == 1


@pytest.mark.parametrize("replacement", ["directory", "fifo"])
def test_path_that_is_no_longer_a_regular_file_is_missing(harness: Harness, replacement: str):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.path.unlink()
    if replacement == "directory":
        t.path.mkdir()
    else:
        os.mkfifo(t.path)
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "missing"


def _make_unreadable(path: Path, how: str) -> None:
    path.unlink()
    if how == "symlink-loop":
        os.symlink(path.name, path)  # stat fails with ELOOP
    else:
        path.write_text("x\n")
        path.chmod(0)


@pytest.mark.parametrize("how", ["symlink-loop", "not-a-directory", "chmod-000"])
def test_unreadable_is_inconclusive_and_breaks_no_streak(harness: Harness, how: str):
    """Errors other than "no such file" never count as a miss. Tests run as root, where chmod 000 still
    reads, so the portable cases are a symlink loop (ELOOP) and a path under a regular file (ENOTDIR)."""
    if how == "chmod-000" and os.geteuid() == 0:
        pytest.skip("root reads a mode-000 file; ELOOP and ENOTDIR cover the inconclusive rule")
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    if how == "not-a-directory":  # the link's path runs through a regular file: ENOTDIR
        link = harness.gw.store.get_link(key, "main")
        link.upstream_ref = {"filePath": str(t.path / "child.jsonl")}
        harness.gw.store.upsert_link(link, harness.clock())
    else:
        _make_unreadable(t.path, how)
    for _ in range(4):
        assert harness.entry(harness.tick(), key)["status"] == "unchanged"
    assert harness.gw.link(key) is not None and harness.events(key, "upstream_missing") == []


def test_truncated_file_is_rescanned_from_the_start(harness: Harness):
    """Shorter than its marker: the old content is gone, so everything in the new content is new (the
    history before the truncation is not replayed: it is no longer in the file)."""
    t = ClaudeTranscript(harness.claude_root)
    for i in range(5):
        t.prompt(f"history {i}")
    key = harness.adopt("claude", t.session_id)
    t.path.write_bytes(js_line(t.entry("user", {"role": "user", "content": "rewritten"}, promptSource="typed")))
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 1 and res["note"].startswith("rewritten")
    assert done_at(harness.gw.link(key)["marker"]) == t.size()
    t.prompt("after the rewrite")
    harness.tick()
    assert harness.human_turns(key) == 2


def test_one_bad_link_does_not_stop_the_others(harness: Harness):
    good = ClaudeTranscript(harness.claude_root, cwd="/home/dev/good")
    bad = ClaudeTranscript(harness.claude_root, cwd="/home/dev/bad")
    k_good = harness.adopt("claude", good.session_id)
    k_bad = harness.adopt("claude", bad.session_id)
    link = harness.gw.store.get_link(k_bad, "main")
    assert harness.gw.store.advance_link(k_bad, "main", link.updated_at, {"offset": "not a number"}, harness.clock())
    bad.prompt("never read: the marker is unusable")
    good.prompt("hello")
    res = harness.tick()
    assert harness.entry(res, k_good)["status"] == "recorded"
    assert harness.entry(res, k_bad)["status"] == "unchanged"


def test_unreadable_oversized_row_state_restarts_that_row(tmp_path, roots):
    h = Harness(
        f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(scan_window_bytes=1024), scan_budget_s=0
    )
    try:
        t = ClaudeTranscript(h.claude_root)
        key = h.adopt("claude", t.session_id)
        t.prompt("long " * 1000)
        h.tick()
        link = h.gw.store.get_link(key, "main")
        assert link.marker["row"]["start"] == 0
        h.gw.store.advance_link(
            key,
            "main",
            link.updated_at,
            {"offset": link.marker["offset"], "row": {"start": 0, "state": {"j": "garbage"}}},
            h.clock(),
        )
        assert h.entry(h.tick(), key)["note"] == "oversized row restarted"
        assert done_at(h.gw.link(key)["marker"]) == 0
        for _ in range(10):
            h.tick()
        assert h.human_turns(key) == 1 and done_at(h.gw.link(key)["marker"]) == t.size()
    finally:
        h.close()


def test_two_scans_of_the_same_prompt_from_one_marker_record_it_once(harness: Harness):
    """A gateway's nudge and another process's tick can both scan a link from the same marker before either
    moves it; the second reads further (the host wrote its answer meanwhile). The prompt they both found is
    recorded once; a scan that finds a newer prompt is new activity."""
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    before = harness.gw.link(key)["marker"]
    t.prompt("stop, ship it on Friday instead")
    assert harness.entry(harness.tick(), key)["status"] == "recorded"
    # the other scanner read the marker before this tick moved it, and the file grew before it scanned
    link = harness.gw.store.get_link(key, "main")
    assert link is not None
    assert harness.gw.store.advance_link(key, "main", link.updated_at, before, harness.clock())
    t.assistant("on it")
    second = harness.entry(harness.tick(), key)
    assert second["status"] == "deduplicated", second
    assert len(harness.events(key, "human_direct_message")) == 1
    assert len(harness.notices()) == 1  # told once
    t.prompt("and the release notes")
    assert harness.entry(harness.tick(), key)["status"] == "recorded"
    assert len(harness.events(key, "human_direct_message")) == 2
