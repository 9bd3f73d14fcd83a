"""A transcript that is rewritten, truncated or replaced (new inode) loses no prompt and repeats none.

The link marker carries the file's identity (device, inode, a fingerprint of its first bytes and of
the bytes just before the offset, a CRC of the scanned prefix). Activity dedupe keys include a
fingerprint of the content, so a rewrite whose new prompt ends at an old offset is a new event.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from sessionwatch import Settings
from sessionwatch.clock import ManualClock

from .conftest import Harness, done_at
from .writers import ClaudeTranscript, CodexRollout, js_line


def typed_row(t: ClaudeTranscript, text: str) -> bytes:
    """A typed prompt row whose length depends only on len(text) (uuids and timestamps are fixed-width)."""
    e = t.entry(
        "user",
        {"role": "user", "content": text},
        promptId=str(uuid.uuid4()),
        promptSource="typed",
        permissionMode="default",
    )
    e["parentUuid"] = None
    return js_line(e)


def replace_file(path: Path, data: bytes) -> None:
    """What a sync tool or an editor does: write a new file beside it, then rename it over (new inode)."""
    tmp = path.with_name(path.name + ".sync-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_rewrite_whose_prompt_ends_at_an_old_offset_is_a_new_event(any_harness: Harness):
    """The issue's case: before, the tick said "recorded" but the event deduplicated into the old one."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    key = h.adopt("claude", t.session_id)
    first, second = typed_row(t, "first question"), typed_row(t, "other question")
    assert len(first) == len(second)
    t.append_bytes(first)
    assert h.entry(h.tick(), key)["status"] == "recorded"
    assert len(h.gw.drain_system_events("agent:main:main")) == 1
    t.path.write_bytes(b"")  # truncated in place (same inode)...
    h.tick()
    t.append_bytes(second)  # ...and rewritten: the new prompt ends exactly where the old one did
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 1
    assert len(h.events(key, "human_direct_message")) == 2
    assert len(h.notices()) == 1  # the watcher is told


def test_rewrite_in_place_between_ticks_is_rescanned_from_the_start(any_harness: Harness):
    """Truncated and rewritten past the old offset before the next tick: same inode, longer, other bytes."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    t.prompt("history one")
    t.assistant("answer")
    key = h.adopt("claude", t.session_id)
    other = ClaudeTranscript(h.claude_root, cwd="/home/dev/elsewhere")
    for i in range(4):
        other.prompt(f"new conversation prompt {i}")
        other.assistant("ok")
    ino = t.path.stat().st_ino
    with open(t.path, "r+b") as fh:  # rewrite the same inode
        fh.truncate(0)
        fh.write(other.path.read_bytes())
    assert t.path.stat().st_ino == ino and t.size() > h.gw.link(key)["marker"]["offset"]
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 4 and "rewritten" in res["note"]
    assert h.gw.link(key)["marker"]["offset"] == t.size()
    assert h.entry(h.tick(), key)["status"] == "unchanged"


def test_replaced_by_a_different_longer_file_counts_every_prompt_in_it(any_harness: Harness):
    """Before, the scan resumed at the old offset inside the new content: every prompt before it was lost."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    for i in range(3):
        t.prompt(f"history {i}")
        t.assistant("answer " * 20)
    key = h.adopt("claude", t.session_id)
    other = ClaudeTranscript(h.claude_root, cwd="/home/dev/elsewhere")
    for i in range(5):
        other.prompt(f"prompt in the replacement {i}")
        other.tool_result("output " * 40)
    assert other.size() > t.size()
    ino = t.path.stat().st_ino
    replace_file(t.path, other.path.read_bytes())
    assert t.path.stat().st_ino != ino
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 5 and "replaced" in res["note"]
    assert h.human_turns(key) == 5
    t.prompt("and one more")
    assert h.entry(h.tick(), key)["humanTurns"] == 1


def test_replaced_by_its_own_content_plus_more_reports_only_the_new_prompts(any_harness: Harness):
    """A sync tool or an editor writes the old bytes plus new rows as a new file: nothing old repeats."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    key = h.adopt("claude", t.session_id)
    for i in range(3):
        t.prompt(f"reported once {i}")
        t.assistant("ok")
    assert h.entry(h.tick(), key)["humanTurns"] == 3
    old = t.path.read_bytes()
    replace_file(t.path, old + typed_row(t, "new after the sync") + typed_row(t, "and another"))
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 2
    assert h.human_turns(key) == 5
    # the same content again under yet another inode: nothing new, the identity follows the file
    replace_file(t.path, t.path.read_bytes())
    assert h.entry(h.tick(), key)["status"] == "advanced"
    assert h.entry(h.tick(), key)["status"] == "unchanged"
    assert h.human_turns(key) == 5


def test_replaced_by_a_copy_of_only_part_of_the_content_is_rescanned(harness: Harness):
    """Same first bytes, but the scanned prefix differs (an edit in the middle): rescan, do not resume."""
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    rows = [typed_row(t, f"question number {i}") for i in range(4)]
    t.append_bytes(b"".join(rows))
    assert harness.entry(harness.tick(), key)["humanTurns"] == 4
    edited = rows[0] + rows[1].replace(b"question number 1", b"question NUMBER 1") + rows[2] + rows[3]
    replace_file(t.path, edited + typed_row(t, "typed after the edit"))
    res = harness.entry(harness.tick(), key)
    # rescanned: the edited prompt is new text, the three untouched ones are not reported again
    assert res["humanTurns"] == 2 and "replaced" in res["note"]


def test_codex_rollout_replaced_by_a_longer_file(harness: Harness):
    r = CodexRollout(harness.codex_root)
    r.user_legacy("history")
    key = harness.adopt("codex", r.thread_id)
    other = CodexRollout(harness.codex_root)
    for i in range(3):
        other.user_legacy(f"replacement prompt {i}")
        other.agent("done")
    replace_file(r.path, other.path.read_bytes())
    assert harness.entry(harness.tick(), key)["humanTurns"] == 3


def test_an_activity_found_again_is_reported_as_deduplicated_not_recorded(any_harness: Harness):
    """The recording succeeded but the marker did not move (a crash in between): the retry deduplicates,
    and the tick says so instead of claiming a new recording."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    key = h.adopt("claude", t.session_id)
    before = h.gw.store.get_link(key, "main").marker
    t.prompt("typed once")
    first = h.entry(h.tick(), key)
    assert first["status"] == "recorded"
    link = h.gw.store.get_link(key, "main")
    assert h.gw.store.advance_link(key, "main", link.updated_at, before, h.clock())  # put the marker back
    again = h.entry(h.tick(), key)
    assert again["status"] == "deduplicated" and again["sequence"] == first["sequence"]
    assert "no new notice" in again["reason"]
    assert len(h.events(key, "human_direct_message")) == 1
    assert h.gw.link(key)["marker"]["offset"] == t.size()


def test_a_rescan_never_reports_a_prompt_again(any_harness: Harness):
    """A rewrite that drops the first rows and reformats the rest is rescanned from the start: only the
    prompt typed after it counts; the ones reported before are recognized by their time and text."""
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    key = h.adopt("claude", t.session_id)
    for i in range(4):
        t.prompt(f"reported prompt {i}")
        t.assistant("ok")
    assert h.entry(h.tick(), key)["humanTurns"] == 4
    rows = [json.loads(line) for line in t.path.read_bytes().splitlines()]
    kept = b"".join((json.dumps(r, indent=None) + "\n").encode() for r in rows[2:])  # other spacing
    replace_file(t.path, kept + typed_row(t, "typed after the rewrite"))
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 1, res
    assert "reported before" in res["note"]
    assert h.human_turns(key) == 5


def test_a_rescan_over_several_ticks_still_skips_what_was_reported(tmp_path: Path, roots: tuple[Path, Path]):
    h = Harness(
        f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(scan_window_bytes=2048), scan_budget_s=0
    )
    try:
        t = ClaudeTranscript(h.claude_root)
        key = h.adopt("claude", t.session_id)
        for i in range(10):
            t.prompt(f"reported prompt {i}")
            t.assistant("answer " * 40)
        for _ in range(40):
            h.tick()
        assert h.human_turns(key) == 10
        t.path.write_bytes(t.path.read_bytes().replace(b"\n", b"\r\n"))  # rewritten in place, CRLF
        t.prompt("the only new one")
        for _ in range(40):
            h.tick()
        assert h.human_turns(key) == 11
        marker = h.gw.link(key)["marker"]
        assert done_at(marker) == t.size() and "rescanTo" not in marker
    finally:
        h.close()
