"""Catalog listing, adoption (continue) semantics and their error cases."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from sessionwatch import InvalidArgument, NotFound
from sessionwatch.upstream.catalogs import LocalCatalog, default_root
from sessionwatch.upstream.links import source_key

from .conftest import Harness, done_at
from .writers import ClaudeTranscript, CodexRollout


def test_claude_listing_shows_main_transcripts_newest_first(harness: Harness):
    old = ClaudeTranscript(harness.claude_root, cwd="/home/dev/old")
    old.prompt("the old one")
    new = ClaudeTranscript(harness.claude_root, cwd="/home/dev/new.api")
    new.meta("<local-command-caveat>x</local-command-caveat>")
    new.prompt("  the   new one ")
    os.utime(old.path, (1_700_000_000, 1_700_000_000))
    (new.dir / "agent-a1b2c3.jsonl").write_text(old.path.read_text())  # an older build's sub-agent file
    (new.dir / new.session_id / "subagents").mkdir(parents=True)
    (new.dir / new.session_id / "subagents" / "agent-x.jsonl").write_text("{}\n")
    (new.dir / "notes.txt").write_text("not a transcript")
    listing = harness.gw.list_threads("claude")
    assert [t["threadId"] for t in listing] == [new.session_id, old.session_id]
    top = listing[0]
    assert top["title"] == "the new one" and top["cwd"] == "/home/dev/new.api" and top["hostId"] == "gateway:local"
    assert top["filePath"] == str(new.path) and top["sizeBytes"] == new.size()
    assert new.dir.name == "-home-dev-new-api"


def test_codex_listing_reads_ids_from_rollout_names(harness: Harness):
    a = CodexRollout(harness.codex_root, when=datetime(2027, 1, 10, 9, 30, tzinfo=UTC))
    a.user_legacy("first codex prompt")
    b = CodexRollout(harness.codex_root, when=datetime(2027, 1, 12, 9, 30, tzinfo=UTC))
    b.user_paginated("paginated", "prompt")
    (harness.codex_root / "sessions" / "2027" / "01" / "12" / "rollout-garbage.jsonl").write_text("{}\n")
    listing = {t["threadId"]: t for t in harness.gw.list_threads("codex")}
    assert set(listing) == {a.thread_id, b.thread_id}
    assert listing[a.thread_id]["title"] == "first codex prompt"
    assert listing[b.thread_id]["title"] == "paginated prompt"
    assert listing[a.thread_id]["cwd"] == "/home/dev/acme-api"


def test_listing_missing_roots_is_empty(tmp_path):
    cat = LocalCatalog("claude", tmp_path / "nothing-here")
    assert cat.list_threads() == [] and cat.locate("abc") is None


def test_default_roots_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    assert default_root("claude") == tmp_path / "cc" and default_root("codex") == tmp_path / "cx"
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    assert str(default_root("claude")).endswith(".claude")


def test_continue_creates_the_session_and_records_adopted_once(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    res = harness.gw.continue_thread("claude", t.session_id)
    key = res["sessionKey"]
    assert key == f"agent:main:claude:{t.session_id}" and res["agentId"] == "main" and res["adoption"] == "created"
    assert harness.gw.get_session(key)["sessionKey"] == key
    link = res["link"]
    assert link["sourceKey"] == source_key("gateway:local", t.session_id, {"filePath": str(t.path)})
    assert harness.gw.link(key) == link
    (adopted,) = harness.events(key, "adopted")
    assert adopted["summary"] == "adopted from claude" and adopted["actorType"] == "human"  # a person adopts
    full = harness.gw.events_after(0)
    assert [e["payload"] for e in full if e["kind"] == "adopted"] == [
        {"catalogId": "claude", "hostId": "gateway:local"}
    ]
    again = harness.gw.continue_thread("claude", t.session_id)
    assert again["adoption"] == "same" and len(harness.events(key, "adopted")) == 1


def test_same_source_keeps_progress_and_a_new_source_rebases(harness: Harness):
    a = ClaudeTranscript(harness.claude_root, cwd="/a")
    b = ClaudeTranscript(harness.claude_root, cwd="/b")
    b.prompt("history in b")
    key = harness.adopt("claude", a.session_id, session_key="agent:main:worker")
    a.assistant("progress")
    harness.tick()
    progressed = harness.gw.link(key)
    assert done_at(progressed["marker"]) == a.size() and progressed["lastScannedAt"] is not None
    a.prompt("typed, not scanned yet")
    same = harness.gw.continue_thread("claude", a.session_id, session_key=key)["link"]
    assert same["marker"] == progressed["marker"] and same["lastScannedAt"] == progressed["lastScannedAt"]
    assert same["updatedAt"] > progressed["updatedAt"]
    rebased = harness.gw.continue_thread("claude", b.session_id, session_key=key)
    assert rebased["adoption"] == "rebased" and done_at(rebased["link"]["marker"]) == b.size()
    assert rebased["link"]["lastScannedAt"] is None and rebased["link"]["sourceKey"] != same["sourceKey"]
    harness.tick()
    assert harness.events(key, "human_direct_message") == []  # a's new prompt is no longer this session's
    b.prompt("typed in b")
    harness.tick()
    assert harness.human_turns(key) == 1


@pytest.mark.parametrize(
    "catalog,thread,host,err",
    [
        ("gemini", "abc", "gateway:local", NotFound),
        ("claude", "../../etc/passwd", "gateway:local", InvalidArgument),
        ("claude", "a/b", "gateway:local", InvalidArgument),
        ("claude", "", "gateway:local", InvalidArgument),
        ("claude", "x" * 201, "gateway:local", InvalidArgument),
        ("claude", 42, "gateway:local", InvalidArgument),
        ("claude", "4f1c2b9e-0000-4000-8000-000000000000", "gateway:local", NotFound),
        ("claude", "abc", "node:", InvalidArgument),
    ],
)
def test_continue_refuses_bad_input_and_changes_nothing(harness: Harness, catalog, thread, host, err):
    ClaudeTranscript(harness.claude_root)
    with pytest.raises(err):
        harness.gw.continue_thread(catalog, thread, host_id=host)
    assert harness.gw.list_sessions() == [] and harness.gw.store.links() == []


def test_continue_refuses_a_bad_session_key(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    with pytest.raises(InvalidArgument):
        harness.gw.continue_thread("claude", t.session_id, session_key="not a key")
    with pytest.raises(InvalidArgument):
        harness.gw.continue_thread("claude", t.session_id, session_key="global")  # needs an agent
    assert harness.gw.store.links() == []


def test_list_threads_of_an_unknown_catalog(harness: Harness):
    with pytest.raises(NotFound):
        harness.gw.list_threads("gemini")
    with pytest.raises(NotFound):
        harness.gw.list_threads("node:ghost")


def test_unlistable_catalog_continues_without_a_link(harness: Harness):
    """v1: when listing fails the continuation still succeeds, with no link (no baseline, no replay)."""
    t = ClaudeTranscript(harness.claude_root)
    projects = harness.claude_root / "projects"
    os.rename(projects, harness.claude_root / "moved")
    os.symlink("projects", projects)  # a symlink loop: scandir fails with ELOOP
    res = harness.gw.continue_thread("claude", t.session_id)
    assert res["linked"] is False and res["link"] is None and "listing" in res["reason"]
    assert harness.gw.get_session(res["sessionKey"])["sessionKey"] == res["sessionKey"]
    assert harness.events(res["sessionKey"], "adopted") == []
    assert harness.gw.list_threads("claude") == []  # reads degrade to empty


def test_transcript_that_is_not_a_regular_file_is_not_found(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    t.path.unlink()
    os.symlink(t.path.name, t.path)  # a symlink loop: listed, but no regular file to baseline
    with pytest.raises(NotFound):
        harness.gw.continue_thread("claude", t.session_id)
    assert harness.gw.link(f"agent:main:claude:{t.session_id}") is None


def test_link_is_none_when_not_adopted(harness: Harness):
    harness.gw.put_session("agent:main:plain")
    assert harness.gw.link("agent:main:plain") is None
    with pytest.raises(InvalidArgument):
        harness.gw.link("bad key")
