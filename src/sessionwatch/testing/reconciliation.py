"""Reconciliation and the read tools, all through Gateway.call_tool."""

from __future__ import annotations

import json
import threading
from typing import Any

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.store.records import EventInput

from .helpers import AGENT, CHILD, DAY, MAIN, human, notice, ok, send, spawn, status, texts
from .suite import SuiteBase


def _fenced_json(text: str) -> dict[str, Any]:
    head, block = text.split("\nSession state changes:\n```json\n")
    assert block.endswith("\n```")
    parsed: dict[str, Any] = json.loads(block[: -len("\n```")])
    return parsed


def _reads_change_nothing(gw: Gateway) -> None:
    gw.put_session(MAIN)
    spawned = spawn(gw, MAIN, "kid")["stateVersion"]
    human(gw, CHILD)
    before = (gw.cursors(), texts(gw, MAIN))
    for since in (None, 0, spawned, 10**9):
        status(gw, MAIN, CHILD, since=since)
        ok(gw.call_tool("sessions_list", {}, caller=MAIN))
        ok(gw.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN))
    assert (gw.cursors(), texts(gw, MAIN)) == before
    assert texts(gw, MAIN) == [notice(CHILD, spawned)]


class ReconciliationTests(SuiteBase):
    """Reconciliation and the read tools, all through Gateway.call_tool."""

    def test_status_without_changes_since_has_version_only(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        out = status(gw, MAIN, MAIN)
        assert out["stateVersion"] == 0 and out["sessionKey"] == MAIN and out["agentId"] == AGENT
        assert "stateChanges" not in out and "Session state changes:" not in out["text"]
        assert out["sessionId"] == gw.get_session(MAIN)["sessionId"] and out["kind"] == "main"
        mine = ok(gw.call_tool("session_status", {}, caller=MAIN))
        assert mine["sessionKey"] == MAIN  # defaults to the caller's own session

    def test_status_with_changes_since_returns_the_exact_typed_delta(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        spawned = spawn(gw, MAIN, "kid", run_id="r1")["stateVersion"]
        human(gw, CHILD, channel="webchat")
        gw.set_goal(CHILD, "create", objective="o", actor={"type": "human", "id": "ann"})
        gw.end_run(CHILD, "r1", "timeout")
        out = status(gw, MAIN, CHILD, since=spawned)
        changes = out["stateChanges"]
        assert [(e["kind"], e["actorType"], e["summary"]) for e in changes["events"]] == [
            ("human_direct_message", "human", "human message via webchat"),
            ("goal_changed", "human", "goal created"),
            ("run_failed", "system", "child run timed out"),
        ]
        assert set(changes["events"][1]) == {"sequence", "kind", "actorType", "occurredAt", "summary", "actorId"}
        assert changes["events"][2] == {
            "sequence": changes["events"][2]["sequence"],
            "kind": "run_failed",
            "actorType": "system",
            "occurredAt": changes["events"][2]["occurredAt"],
            "summary": "child run timed out",
            "runId": "r1",
            "payload": {"outcome": "timeout"},
        }
        assert changes["truncated"] is False and changes["historyGap"] is False
        assert changes["earliestAvailableSequence"] == spawned - 1  # the created event
        assert out["stateVersion"] == changes["events"][-1]["sequence"]
        assert out["spawnedBy"] == MAIN and out["goal"]["objective"] == "o"
        assert out["text"].startswith(f"Session {CHILD} (agent {AGENT}, subagent)")
        assert _fenced_json(out["text"]) == {"stateVersion": out["stateVersion"], "stateChanges": changes}
        baseline = status(gw, MAIN, CHILD, since=0)["stateChanges"]["events"]
        assert [e["kind"] for e in baseline][:2] == ["created", "child_spawned"]

    def test_strict_v1_status_never_moves_a_cursor(self, clock: ManualClock) -> None:
        """With reconcile_acknowledges off (strict v1), no read moves a cursor or touches the queue."""
        gw = self.open_gateway(clock=clock, settings=Settings(reconcile_acknowledges=False))
        try:
            _reads_change_nothing(gw)
        finally:
            gw.close()

    def test_status_without_changes_never_moves_a_cursor(self, gw: Gateway) -> None:
        """Reads that return no events acknowledge nothing, whatever the setting."""
        gw.put_session(MAIN)
        spawned = spawn(gw, MAIN, "kid")["stateVersion"]
        human(gw, CHILD)
        before = (gw.cursors(), texts(gw, MAIN))
        for since in (None, 10**9):
            status(gw, MAIN, CHILD, since=since)
        status(gw, "agent:a:subagent:kid", MAIN, since=0)  # not a watcher of main
        assert (gw.cursors(), texts(gw, MAIN)) == before
        assert texts(gw, MAIN) == [notice(CHILD, spawned)]

    def test_pages_hold_at_most_200_events(self, gw: Gateway) -> None:
        gw.put_session("agent:a:x")
        seqs = [gw.record_compaction("agent:a:x", f"x{i}")["event"]["sequence"] for i in range(205)]
        first = status(gw, "agent:a:x", "agent:a:x", since=0)["stateChanges"]
        assert len(first["events"]) == 200 and first["truncated"] is True
        assert [e["sequence"] for e in first["events"]] == seqs[:200]
        assert first["earliestAvailableSequence"] == seqs[0]
        rest = status(gw, "agent:a:x", "agent:a:x", since=first["events"][-1]["sequence"])["stateChanges"]
        assert [e["sequence"] for e in rest["events"]] == seqs[200:] and rest["truncated"] is False
        exact = status(gw, "agent:a:x", "agent:a:x", since=seqs[4])["stateChanges"]
        assert len(exact["events"]) == 200 and exact["truncated"] is False
        assert status(gw, "agent:a:x", "agent:a:x", since=seqs[-1])["stateChanges"]["events"] == []
        small = gw.changes_since("agent:a:x", 0, limit=3)
        assert len(small.events) == 3 and small.truncated is True

    def test_page_size_is_configurable(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(changes_page_size=2)) as gw:
            gw.put_session("agent:a:x")
            for i in range(3):
                gw.record_compaction("agent:a:x", f"x{i}")
            page = status(gw, "agent:a:x", "agent:a:x", since=0)["stateChanges"]
            assert len(page["events"]) == 2 and page["truncated"] is True

    def test_history_gap_and_earliest_through_the_tool(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session("agent:a:x")
        old = gw.record_compaction("agent:a:x", "old")["event"]["sequence"]
        clock.advance(31 * DAY)
        gw.prune(force=True)
        page = status(gw, "agent:a:x", "agent:a:x", since=0)["stateChanges"]
        assert page == {"events": [], "truncated": False, "earliestAvailableSequence": old + 1, "historyGap": True}
        assert status(gw, "agent:a:x", "agent:a:x", since=old)["stateChanges"]["historyGap"] is False
        new = gw.record_compaction("agent:a:x", "new")["event"]["sequence"]
        page = status(gw, "agent:a:x", "agent:a:x", since=0)["stateChanges"]
        assert page["earliestAvailableSequence"] == new and page["historyGap"] is True
        assert [e["sequence"] for e in page["events"]] == [new]

    def test_payload_projection_keeps_only_outcome_channel_and_turns(self, gw: Gateway) -> None:
        gw.put_session("agent:a:x")
        payloads: list[dict[str, Any]] = [
            {"outcome": "error", "channel": "claude", "turns": 3, "catalogId": "c", "text": "secret"},
            {"outcome": "ok", "channel": "", "turns": 0},
            {"turns": True},
            {"turns": 2**53},
            {"turns": 2**53 - 1},
            {"turns": 1.5, "channel": 7},
            {"outcome": "cancelled"},
            {},
        ]
        for p in payloads:
            gw.record(EventInput("agent:a:x", AGENT, "compacted", "system", "session compacted", 0, payload=p))
        events = status(gw, "agent:a:x", "agent:a:x", since=0)["stateChanges"]["events"]
        assert [e.get("payload") for e in events] == [
            {"outcome": "error", "channel": "claude", "turns": 3},
            None,
            None,
            None,
            {"turns": 2**53 - 1},
            None,
            {"outcome": "cancelled"},
            None,
        ]
        assert all("payload" not in e for e in events if e.get("payload") is None)

    def test_sessions_list_shows_state_version_only_when_non_zero(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session("agent:a:quiet")
        gw.put_session("agent:b:main")
        gw.put_session("global", agent_id="b")
        spawned = spawn(gw, MAIN, "kid")["stateVersion"]
        gw.record_compaction("global", "g", agent_id="b")
        rows = {
            (r["sessionKey"], r["agentId"]): r for r in ok(gw.call_tool("sessions_list", {}, caller=MAIN))["sessions"]
        }
        assert "stateVersion" not in rows[(MAIN, "a")] and "stateVersion" not in rows[("agent:a:quiet", "a")]
        assert rows[(CHILD, "a")]["stateVersion"] == spawned
        assert rows[(CHILD, "a")]["spawnedBy"] == MAIN and rows[(CHILD, "a")]["kind"] == "subagent"
        assert rows[("global", "b")]["stateVersion"] == gw.state_version("global", agent_id="b")
        only_b = ok(gw.call_tool("sessions_list", {"agentId": "b"}, caller=MAIN))["sessions"]
        assert {r["sessionKey"] for r in only_b} == {"agent:b:main", "global"}
        subs = ok(gw.call_tool("sessions_list", {"kinds": ["subagent"]}, caller=MAIN))
        assert [r["sessionKey"] for r in subs["sessions"]] == [CHILD]
        assert f"stateVersion {spawned}" in subs["text"]
        assert len(ok(gw.call_tool("sessions_list", {"limit": 2}, caller=MAIN))["sessions"]) == 2
        assert ok(gw.call_tool("sessions_list", {"kinds": ["cron"]}, caller=MAIN)) == {
            "sessions": [],
            "text": "No sessions.",
        }

    def test_sessions_history_is_the_transcript(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        spawn(gw, MAIN, "kid", task="first task")
        send(gw, MAIN, CHILD, "second")
        gw.append_message(CHILD, "assistant", "on it")
        human(gw, CHILD)
        out = ok(gw.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN))
        assert [(m["role"], m["text"]) for m in out["messages"]] == [
            ("user", "first task"),
            ("user", "second"),
            ("assistant", "on it"),
            ("user", "a person typed this"),
        ]
        assert out["text"].splitlines()[2] == "[assistant] on it"
        last = ok(gw.call_tool("sessions_history", {"sessionKey": CHILD, "limit": 1}, caller=MAIN))
        assert [m["text"] for m in last["messages"]] == ["a person typed this"]

    def test_sessions_send_waits_for_a_reply_or_times_out(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session("agent:a:peer")
        timer = threading.Timer(0.05, lambda: gw.append_message("agent:a:peer", "assistant", "pong"))
        timer.start()
        try:
            out = send(gw, MAIN, "agent:a:peer", "ping", timeoutSeconds=5, watch=True)
        finally:
            timer.join()
        assert out["status"] == "ok" and out["reply"] == "pong" and out["watched"] is True
        assert out["text"] == "Reply from agent:a:peer:\n[assistant] pong"
        late = send(gw, MAIN, "agent:a:peer", "ping again", timeoutSeconds=0.05)
        assert late["status"] == "timeout" and "reply" not in late and "watched" not in late
        quick = send(gw, MAIN, "agent:a:peer", "fire and forget", timeoutSeconds=0)
        assert quick["status"] == "accepted" and isinstance(quick["messageId"], int)
