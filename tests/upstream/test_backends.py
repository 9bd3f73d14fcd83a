"""The core upstream flows on every store backend (SQLite, and PostgreSQL when the server is there)."""

from __future__ import annotations

from .conftest import Harness, done_at
from .writers import ClaudeTranscript, CodexRollout


def test_adopt_burst_echo_and_missing(any_harness: Harness):
    h = any_harness
    t = ClaudeTranscript(h.claude_root)
    t.prompt("history")
    key = h.adopt("claude", t.session_id)
    assert h.gw.continue_thread("claude", t.session_id)["adoption"] == "same"
    h.gw.call_tool("sessions_send", {"sessionKey": key, "message": "our prompt"}, caller="agent:main:main")
    t.prompt("our prompt", source=None)
    t.prompt("person one")
    t.prompt("person two")
    res = h.entry(h.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 2
    assert len(h.notices()) == 1 and h.human_turns(key) == 2
    assert h.entry(h.tick(), key)["status"] == "unchanged"
    t.path.unlink()
    h.tick()
    h.tick()
    h.restart()
    assert h.entry(h.tick(), key)["status"] == "removed"
    assert [e["payload"] for e in h.events(key, "upstream_missing")] == [{"channel": "claude"}]
    assert h.gw.link(key) is None and len(h.events(key, "adopted")) == 1


def test_rebase_and_codex(any_harness: Harness):
    h = any_harness
    a = CodexRollout(h.codex_root)
    b = CodexRollout(h.codex_root)
    key = h.adopt("codex", a.thread_id, session_key="agent:main:worker")
    a.user_legacy("typed in a")
    h.tick()
    res = h.gw.continue_thread("codex", b.thread_id, session_key=key)
    assert res["adoption"] == "rebased" and done_at(res["link"]["marker"]) == b.size()
    b.user_paginated("typed", "in b")
    h.tick()
    assert h.human_turns(key) == 2
