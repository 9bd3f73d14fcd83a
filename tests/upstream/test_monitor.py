"""The monitor's rules: demand, deferral, self-echo, re-validation after I/O, the miss streak, failures,
single-flight ticks and the timed schedule."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from sessionwatch import Settings

from .conftest import WATCHER, Harness, done_at
from .writers import ClaudeTranscript, CodexRollout


def wrap_provider(h: Harness, during_scan) -> None:
    """Run ``during_scan()`` inside the provider, after its I/O: a change racing the tick."""
    real = h.gw.upstream._provider_for

    class Racing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def scan(self, probes):
            out = self.inner.scan(probes)
            during_scan()
            return out

    h.gw.upstream.monitor.provider_for = lambda c, host: Racing(real(c, host))


def test_only_watched_links_are_scanned(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id, watcher=None)
    t.prompt("nobody is watching")
    (entry,) = harness.tick()["links"]  # reported, with the reason, but not scanned
    assert entry["sessionKey"] == key and entry["status"] == "skipped" and "not watched" in entry["reason"]
    assert harness.events(key, "human_direct_message") == []
    harness.gw.put_session(WATCHER)
    harness.gw.watch(WATCHER, key)
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1


def test_active_run_defers_without_moving_the_marker(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    before = harness.gw.link(key)["marker"]
    harness.gw.begin_run(key, "run-1")
    t.prompt("typed while the agent runs")
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "deferred" and res["reason"] == "active run"
    assert harness.gw.link(key)["marker"] == before
    harness.gw.end_run(key, "run-1", "ok")
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1


def test_self_echo_of_sessions_send_is_not_a_person(harness: Harness):
    """The watcher's own prompt comes back through the upstream transcript: no notice. A person's
    prompt does, and one equal to an imported history message still counts."""
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    sent = harness.gw.call_tool(
        "sessions_send", {"sessionKey": key, "message": "please  run the tests"}, caller=WATCHER
    )
    assert sent["status"] == "accepted"
    t.prompt("please run the tests", source=None)  # the harness typed our message upstream
    harness.tick()
    assert harness.events(key, "human_direct_message") == [] and harness.notices() == []
    harness.gw.append_message(key, "user", "imported from the catalog", imported=True)
    t.prompt("imported from the catalog")
    harness.tick()
    assert harness.human_turns(key) == 1 and len(harness.notices()) == 1


def test_self_echo_window_is_the_ten_most_recent_own_texts(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    for i in range(11):
        harness.gw.call_tool("sessions_send", {"sessionKey": key, "message": f"own {i}"}, caller=WATCHER)
    t.prompt("own 10", source=None)
    t.prompt("own 1", source=None)
    harness.tick()
    assert harness.human_turns(key) == 0
    t.prompt("own 0", source=None)  # the 11th most recent: outside the window
    harness.tick()
    assert harness.human_turns(key) == 1


def test_continue_during_the_scan_drops_the_result(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("typed")
    wrap_provider(harness, lambda: harness.gw.continue_thread("claude", t.session_id, session_key=key))
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "changed"
    assert harness.events(key, "human_direct_message") == []
    assert harness.gw.link(key)["marker"]["offset"] < t.size()  # same source: progress kept, not overwritten
    harness.gw.upstream.monitor.provider_for = harness.gw.upstream._provider_for
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1


def test_rebase_during_the_scan_records_nothing_for_the_old_source(harness: Harness):
    old = ClaudeTranscript(harness.claude_root, cwd="/a")
    new = ClaudeTranscript(harness.claude_root, cwd="/b")
    key = harness.adopt("claude", old.session_id)
    old.prompt("typed in the old thread")
    wrap_provider(harness, lambda: harness.gw.continue_thread("claude", new.session_id, session_key=key))
    assert harness.entry(harness.tick(), key)["status"] == "changed"
    link = harness.gw.link(key)
    assert link["threadId"] == new.session_id and done_at(link["marker"]) == new.size()
    assert harness.events(key, "human_direct_message") == []


def test_own_text_written_during_the_scan_defers(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("deploy now", source=None)
    # our own prompt lands in the session while the provider was reading: the result is stale
    wrap_provider(
        harness,
        lambda: harness.gw.call_tool("sessions_send", {"sessionKey": key, "message": "deploy now"}, caller=WATCHER),
    )
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "deferred" and "own texts" in res["reason"]
    harness.gw.upstream.monitor.provider_for = harness.gw.upstream._provider_for
    harness.tick()
    assert harness.events(key, "human_direct_message") == []  # now recognized as our own echo


def test_reset_or_run_during_the_scan_defers(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("typed")
    wrap_provider(harness, lambda: harness.gw.begin_run(key, "r1"))
    assert harness.entry(harness.tick(), key)["reason"] == "active run"
    harness.gw.end_run(key, "r1", "ok")
    wrap_provider(harness, lambda: harness.gw.reset_session(key))
    assert harness.entry(harness.tick(), key)["reason"] == "session changed"
    harness.gw.upstream.monitor.provider_for = harness.gw.upstream._provider_for
    assert harness.entry(harness.tick(), key)["humanTurns"] == 1


def test_three_misses_across_a_restart_record_upstream_missing_once(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.path.unlink()
    assert harness.entry(harness.tick(), key)["missCount"] == 1
    assert harness.entry(harness.tick(), key)["missCount"] == 2
    harness.restart()  # the streak lives in the link row
    assert harness.gw.link(key)["missCount"] == 2
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "removed" and res["missCount"] == 3
    (ev,) = harness.events(key, "upstream_missing")
    assert ev["actorType"] == "system" and ev["summary"] == "upstream missing via claude"
    assert ev["payload"] == {"channel": "claude"}
    assert harness.gw.link(key) is None
    assert len(harness.notices()) == 1
    assert harness.tick()["links"] == []  # no link, nothing scanned
    t.prompt("the file is back")  # recreated: a fresh link and baseline on the next continue
    again = harness.gw.continue_thread("claude", t.session_id, session_key=key)
    assert again["adoption"] == "created" and done_at(again["link"]["marker"]) == t.size()
    assert len(harness.events(key, "adopted")) == 1  # adopted once per key, ever


def test_any_non_miss_and_a_continue_reset_the_streak(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    saved = t.path.read_bytes()
    t.path.unlink()
    harness.tick()
    harness.tick()
    t.path.write_bytes(saved)  # back (no change): an inconclusive "nothing new" breaks the streak
    back = harness.entry(harness.tick(), key)
    # the same inode number is often reused; when it is not, the same content is recognized
    assert back["status"] == "unchanged" or back.get("note") == "replaced by a file with the same content"
    assert harness.gw.link(key)["missCount"] == 0
    t.path.unlink()
    harness.tick()
    harness.tick()
    t.path.write_bytes(saved)
    harness.gw.continue_thread("claude", t.session_id, session_key=key)  # same source: streak restarts
    assert harness.gw.link(key)["missCount"] == 0
    t.path.unlink()
    assert harness.entry(harness.tick(), key)["missCount"] == 1
    assert harness.entry(harness.tick(), key)["missCount"] == 2
    assert harness.entry(harness.tick(), key)["status"] == "removed"


def test_a_failed_record_keeps_the_marker_and_retries(harness: Harness, tmp_path):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("typed")
    before = harness.gw.link(key)["marker"]
    db = sqlite3.connect(tmp_path / "state.db")
    db.execute(
        "CREATE TRIGGER no_human BEFORE INSERT ON events WHEN NEW.kind = 'human_direct_message'"
        " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
    )
    db.commit()
    assert harness.entry(harness.tick(), key)["status"] == "record-failed"
    assert harness.gw.link(key)["marker"] == before
    db.execute("DROP TRIGGER no_human")
    db.commit()
    db.close()
    assert harness.entry(harness.tick(), key)["status"] == "recorded"
    assert harness.human_turns(key) == 1


def test_failed_missing_record_retries_on_the_next_miss(harness: Harness, tmp_path):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.path.unlink()
    db = sqlite3.connect(tmp_path / "state.db")
    db.execute(
        "CREATE TRIGGER no_missing BEFORE INSERT ON events WHEN NEW.kind = 'upstream_missing'"
        " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
    )
    db.commit()
    for _ in range(3):
        res = harness.entry(harness.tick(), key)
    assert res.get("recordFailed") and harness.gw.link(key)["missCount"] == 2
    db.execute("DROP TRIGGER no_missing")
    db.commit()
    db.close()
    assert harness.entry(harness.tick(), key)["status"] == "removed"


def test_ambiguous_links_under_several_agents_are_skipped(harness: Harness, tmp_path):
    t = ClaudeTranscript(harness.claude_root)
    for agent in ("a", "b"):
        harness.gw.continue_thread("claude", t.session_id, session_key="global", agent_id=agent)
    db = sqlite3.connect(tmp_path / "state.db")  # a bare 'global' target takes no cursor through the API
    db.execute("INSERT INTO cursors (watcher, target, updated_at) VALUES ('agent:a:main', 'global', 0)")
    db.commit()
    db.close()
    t.prompt("typed")
    res = harness.tick()
    assert [e["status"] for e in res["links"]] == ["skipped", "skipped"]
    assert all("several agents" in e["reason"] for e in res["links"])


def test_spawn_parent_is_told_too(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    harness.gw.put_session("agent:main:boss")
    harness.gw.put_session("agent:main:worker", spawned_by="agent:main:boss")
    harness.adopt("claude", t.session_id, session_key="agent:main:worker")
    t.prompt("typed")
    harness.tick()
    assert len(harness.notices("agent:main:boss")) == 1 and len(harness.notices()) == 1


def test_single_flight_and_stop_aborts_the_tick_in_flight(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    key = harness.adopt("claude", t.session_id)
    t.prompt("typed")
    entered, release = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        release.wait(10)

    wrap_provider(harness, block)
    results: list[dict] = []
    th = threading.Thread(target=lambda: results.append(harness.gw.upstream_tick()))
    th.start()
    assert entered.wait(10)
    busy = harness.gw.upstream_tick()
    assert busy["status"] == "busy" and "already running" in busy["reason"]
    assert harness.entry(busy, key)["status"] == "skipped"  # every link is listed, with the reason
    harness.gw.upstream.stop()
    release.set()
    th.join(10)
    assert results[0]["status"] == "aborted"
    assert harness.events(key, "human_direct_message") == []
    assert harness.gw.upstream_results()["status"] == "aborted"
    harness.gw.upstream.monitor.provider_for = harness.gw.upstream._provider_for
    assert harness.entry(harness.gw.upstream_tick(), key)["status"] == "recorded"  # manual ticks still run


def test_provider_timeout_skips_only_that_provider(tmp_path, roots):
    from sessionwatch.clock import ManualClock

    h = Harness(f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(provider_timeout_ms=700))
    try:
        slow = ClaudeTranscript(h.claude_root)
        fast = CodexRollout(h.codex_root)
        k_slow = h.adopt("claude", slow.session_id)
        k_fast = h.adopt("codex", fast.thread_id)
        slow.prompt("typed")
        fast.user_legacy("typed")
        real = h.gw.upstream._provider_for
        release = threading.Event()

        class Hanging:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def scan(self, probes):
                release.wait(5)
                return self.inner.scan(probes)

        h.gw.upstream.monitor.provider_for = lambda c, host: Hanging(real(c, host)) if c == "claude" else real(c, host)
        res = h.tick()
        release.set()
        assert h.entry(res, k_slow)["reason"] == "provider timed out"
        assert h.entry(res, k_fast)["status"] == "recorded"
        assert {p["catalogId"]: p["status"] for p in res["providers"]} == {"claude": "timeout", "codex": "ok"}
        assert h.events(k_slow, "human_direct_message") == []
        h.gw.upstream.monitor.provider_for = real
        assert h.entry(h.tick(), k_slow)["status"] == "recorded"
    finally:
        h.close()


def test_timed_schedule_first_after_15s_then_every_60s(harness: Harness):
    t = ClaudeTranscript(harness.claude_root)
    harness.adopt("claude", t.session_id)
    gw, clock = harness.gw, harness.clock
    start = clock()
    gw.upstream.start()
    gw.run_due(start + 14_999)
    assert gw.upstream_results()["tick"] == 0
    gw.run_due(start + 15_000)
    assert gw.upstream_results()["tick"] == 1
    gw.run_due(start + 74_999)
    assert gw.upstream_results()["tick"] == 1
    gw.run_due(start + 75_000)
    assert gw.upstream_results()["tick"] == 2
    gw.upstream.stop()
    gw.run_due(start + 10 * 60_000)
    assert gw.upstream_results()["tick"] == 2


def test_schedule_is_configurable(tmp_path, roots):
    from sessionwatch.clock import ManualClock

    clock = ManualClock()
    h = Harness(
        f"sqlite:///{tmp_path}/s.db",
        clock,
        *roots,
        settings=Settings(monitor_first_tick_ms=1000, monitor_interval_ms=5000),
    )
    try:
        h.gw.upstream.start()
        h.gw.run_due(clock() + 1000)
        h.gw.run_due(clock() + 6000)
        assert h.gw.upstream_results()["tick"] == 2
    finally:
        h.close()
