"""SQLite-only checks that need raw access to the file: best-effort recording when writes fail,
failed host reads raising ``unavailable`` (tools flag what degraded), and atomicity of event + notice."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator

import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from sessionwatch.errors import StoreUnavailable
from sessionwatch.store.sqlite import sqlite_path

MAIN = "agent:a:main"
CHILD = "agent:a:subagent:kid"


def _notice(target: str, last_seen: int) -> str:
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {last_seen}.'
    )


def _raw(url: str, *statements: str) -> None:
    """Run statements on the file through a separate connection, as an operator would."""
    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    try:
        for s in statements:
            conn.execute(s)
    finally:
        conn.close()


FAIL_EVENTS = "CREATE TRIGGER fail_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
FAIL_CURSORS = "CREATE TRIGGER fail_cursors BEFORE UPDATE ON cursors BEGIN SELECT RAISE(ABORT, 'cursor write'); END"


@pytest.fixture
def gw(sqlite_url: str, clock: ManualClock) -> Iterator[Gateway]:
    gateway = Gateway.open(sqlite_url, clock=clock)
    gateway.put_session(MAIN)
    gateway.call_tool("sessions_spawn", {"label": "kid", "runId": "r1"}, caller=MAIN)
    yield gateway
    gateway.close()


def test_a_failing_append_is_logged_and_never_fails_the_action(
    gw: Gateway, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    head = gw.state_version(CHILD)
    cursors = gw.cursors()
    _raw(sqlite_url, FAIL_EVENTS)
    with caplog.at_level(logging.ERROR):
        out = gw.inbound(CHILD, "hello", channel="telegram")
    assert out["recorded"] is False and out["event"] is None and out["actorType"] == "human"
    assert "best-effort" in caplog.text and "disk says no" in caplog.text
    assert isinstance(out["messageId"], int)  # the turn itself is still stored
    goal = gw.set_goal(CHILD, "create", objective="o")
    assert goal["recorded"] is False and gw.get_session(CHILD)["goal"]["objective"] == "o"
    assert gw.end_run(CHILD, "r1", "error")["recorded"] is False
    assert gw.record_compaction(CHILD, "op")["recorded"] is False
    made = gw.put_session("agent:a:made", created_by={"type": "human", "id": "x"})
    assert made["created"] is True
    assert gw.state_version(CHILD) == head and gw.cursors() == cursors
    assert gw.peek_system_events(MAIN) == []
    # a failed append is never retried or replayed
    _raw(sqlite_url, "DROP TRIGGER fail_events")
    seq = gw.inbound(CHILD, "again", channel="telegram")["event"]["sequence"]
    assert [e["kind"] for e in gw.events_after(head)] == ["human_direct_message"]
    assert gw.peek_system_events(MAIN)[0]["text"] == _notice(CHILD, head)
    assert gw.state_version(CHILD) == seq


def test_a_spawn_whose_event_cannot_be_written_is_refused_and_a_retry_with_its_run_id_spawns_it(
    gw: Gateway, sqlite_url: str
) -> None:
    # The spawn event and the spawner's cursor are the spawn itself: without them the answer is "retry".
    cursors = gw.cursors()
    _raw(sqlite_url, FAIL_EVENTS)
    spawn = {"label": "other", "runId": "r2"}
    refused = gw.call_tool("sessions_spawn", spawn, caller=MAIN)["error"]
    assert refused["code"] == "unavailable" and "retry with the same runId" in refused["message"]
    assert gw.cursors() == cursors  # the parent watches nothing it was not told about
    _raw(sqlite_url, "DROP TRIGGER fail_events")
    spawned = gw.call_tool("sessions_spawn", spawn, caller=MAIN)
    other = "agent:a:subagent:other"
    assert spawned["sessionKey"] == other and spawned["runId"] == "r2"
    assert gw.cursors(watcher=MAIN, target=other) != []
    assert "child_spawned" in [e["kind"] for e in gw.changes_since(other, 0).events]
    assert gw.call_tool("sessions_spawn", spawn, caller=MAIN)["stateVersion"] == spawned["stateVersion"]


def test_event_and_notice_commit_together_or_not_at_all(gw: Gateway, sqlite_url: str) -> None:
    head = gw.state_version(CHILD)
    _raw(sqlite_url, FAIL_CURSORS)
    out = gw.inbound(CHILD, "hello", channel="telegram")
    assert out["recorded"] is False
    assert gw.state_version(CHILD) == head and gw.events_after(head) == []
    assert gw.peek_system_events(MAIN) == []


def test_a_failing_acknowledge_keeps_the_queue(gw: Gateway, sqlite_url: str) -> None:
    head = gw.state_version(CHILD)
    gw.inbound(CHILD, "hello", channel="telegram")
    _raw(sqlite_url, FAIL_CURSORS)
    with pytest.raises(StoreUnavailable):  # the drain failed as a whole, and says so ...
        gw.drain_system_events(MAIN)
    assert [e["text"] for e in gw.peek_system_events(MAIN)] == [_notice(CHILD, head)]  # ... so nothing is lost
    assert gw.acknowledge(MAIN, [CHILD]) == 0
    _raw(sqlite_url, "DROP TRIGGER fail_cursors")
    assert [e["text"] for e in gw.drain_system_events(MAIN)] == [_notice(CHILD, head)]


def test_a_read_only_store_degrades_without_failing_inbound(gw: Gateway, caplog: pytest.LogCaptureFixture) -> None:
    head = gw.state_version(CHILD)
    gw.store._conn.execute("PRAGMA query_only = ON")  # type: ignore[attr-defined]  # every write now fails
    with caplog.at_level(logging.ERROR):
        out = gw.inbound(CHILD, "hello", channel="telegram")
    assert out == {"recorded": False, "event": None, "messageId": None, "actorType": "human"}
    assert "readonly" in caplog.text
    assert gw.dropped_recordings == {"total": 1, "byCause": {"read_only": 1}}  # dropped, and counted
    assert gw.state_version(CHILD) == head
    status = gw.call_tool("session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN)
    assert status["stateVersion"] == head  # reads still work
    failed = gw.call_tool("sessions_send", {"sessionKey": CHILD, "message": "x"}, caller=MAIN)
    assert failed["error"]["code"] == "unavailable"  # a tool that must write says so, it does not crash
    with pytest.raises(StoreUnavailable):  # a drain that cannot acknowledge is an error, not []
        gw.drain_system_events(MAIN)
    assert gw.readiness()["ready"] is False
    assert gw.sweep() == 0
    assert gw.prune(force=True).skipped is True


def test_failed_reads_raise_and_tools_flag_what_degraded(
    gw: Gateway, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    gw.inbound(CHILD, "hello", channel="telegram")
    gw.enqueue_system_event(MAIN, "cron: x")
    _raw(
        sqlite_url,
        "ALTER TABLE events RENAME TO events_gone",
        "ALTER TABLE heads RENAME TO heads_gone",
        "ALTER TABLE cursors RENAME TO cursors_gone",
        "ALTER TABLE system_events RENAME TO system_events_gone",
    )
    with caplog.at_level(logging.WARNING):
        for read in (
            lambda: gw.state_version(CHILD),
            lambda: gw.changes_since(CHILD, 0),
            lambda: gw.events_after(0),
            gw.cursors,
            lambda: gw.peek_system_events(MAIN),
        ):
            with pytest.raises(StoreUnavailable):  # a host read that failed is an error, never empty
                read()
        status = gw.call_tool("session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN)
        assert status["stateVersion"] == 0 and status["stateChanges"]["events"] == []
        assert status["degraded"] is True and "Degraded" in status["text"]
        listed = gw.call_tool("sessions_list", {}, caller=MAIN)
        assert {s["sessionKey"] for s in listed["sessions"]} == {MAIN, CHILD}
        assert all("stateVersion" not in s for s in listed["sessions"]) and listed["degraded"] is True
    assert "degraded" in caplog.text


def test_the_store_survives_reopening_after_failures(sqlite_url: str, clock: ManualClock) -> None:
    with Gateway.open(sqlite_url, clock=clock) as gw:
        gw.put_session(MAIN)
        gw.call_tool("sessions_spawn", {"label": "kid", "runId": "r1"}, caller=MAIN)
        _raw(sqlite_url, FAIL_EVENTS)
        gw.inbound(CHILD, "lost", channel="t")
    _raw(sqlite_url, "DROP TRIGGER fail_events")
    with Gateway.open(sqlite_url, clock=clock) as gw:
        assert gw.swept == 0
        assert [e["kind"] for e in gw.events_after(0)] == ["created", "child_spawned"]


def test_a_corrupt_file_is_refused_and_left_alone(tmp_path) -> None:
    path = tmp_path / "junk.db"
    junk = b"this is not a database" * 100
    path.write_bytes(junk)
    with pytest.raises(StoreUnavailable, match="cannot open store .*junk.db.*not a database") as err:
        Gateway.open(f"sqlite:///{path}", clock=ManualClock())
    assert err.value.code == "unavailable"
    assert path.read_bytes() == junk


def test_sequences_use_autoincrement_and_survive_vacuum(sqlite_url: str, clock: ManualClock) -> None:
    """Deleting the newest rows and vacuuming never lets SQLite hand out an old sequence again."""
    with Gateway.open(sqlite_url, clock=clock) as gw:
        gw.put_session("agent:a:x")
        last = gw.record_compaction("agent:a:x", "1")["event"]["sequence"]
        gw.delete_session("agent:a:x")
    _raw(sqlite_url, "VACUUM")
    with Gateway.open(sqlite_url, clock=clock) as gw:
        gw.put_session("agent:a:x")
        assert gw.record_compaction("agent:a:x", "2")["event"]["sequence"] > last
