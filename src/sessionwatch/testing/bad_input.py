"""Bad input to every tool and host operation: a clear error with a stable code, and nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sessionwatch import Gateway, SessionwatchError

from .helpers import CHILD, MAIN, human, send, snapshot, spawn
from .suite import SuiteBase

PEER = "agent:a:peer"
GROUP = "agent:a:telegram:group:g1"
KEYS = [MAIN, CHILD, PEER, GROUP, "agent:a:ghost"]
BIG = "x" * (1024 * 1024 + 1)  # one byte over 1 MiB
LONG = "n" * 201


TOOL_CASES: list[tuple[str | None, Any, str | None, str]] = [
    # (tool, args, caller, code)
    ("nope", {}, MAIN, "unknown_tool"),
    ("", {}, MAIN, "unknown_tool"),
    ("Session_Status", {}, MAIN, "unknown_tool"),
    (None, {}, MAIN, "unknown_tool"),
    ("session_status", {}, "not a key", "invalid_argument"),
    ("session_status", {}, "", "invalid_argument"),
    ("session_status", {}, None, "invalid_argument"),
    ("session_status", {}, "global", "invalid_argument"),  # a bare global caller must name its agent
    ("session_status", ["x"], MAIN, "invalid_argument"),
    ("session_status", "changesSince=3", MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "bogus": 1}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": -1}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": 1.5}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": 3.0}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": "3"}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": True}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": CHILD, "changesSince": [1]}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": "agent:a:ghost"}, MAIN, "not_found"),
    ("session_status", {"sessionKey": "agent::x"}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": "agent:a:x y"}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": "agent:a:" + "x" * 510}, MAIN, "invalid_argument"),
    ("session_status", {"sessionKey": 5}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": LONG}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "has space"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "a:b:"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": 7}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "sessionKey": "agent:a:subagent:x"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"sessionKey": "global"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"sessionKey": "bad"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"sessionKey": MAIN}, MAIN, "invalid_argument"),  # itself
    ("sessions_spawn", {"sessionKey": "agent:b:subagent:x", "agentId": "a"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "agentId": "a:b"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "agentId": LONG}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "task": BIG}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "task": 3}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "runId": LONG}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "runId": ""}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "runId": 12}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x", "name": "y"}, MAIN, "invalid_argument"),
    ("sessions_spawn", {"label": "x"}, "agent:a:ghost", "not_found"),
    ("sessions_spawn", {"label": "kid"}, PEER, "conflict"),
    ("sessions_send", {"message": "x"}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": ""}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "   "}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": BIG}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": 5}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "watch": "true"}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "watch": 1}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "timeoutSeconds": -1}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "timeoutSeconds": 601}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "timeoutSeconds": "5"}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "timeoutSeconds": True}, MAIN, "invalid_argument"),
    ("sessions_send", {"sessionKey": "agent:a:ghost", "message": "x", "watch": True}, MAIN, "not_found"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "watch": True}, "agent:a:ghost", "not_found"),
    ("sessions_send", {"sessionKey": CHILD, "message": "x", "to": PEER}, MAIN, "invalid_argument"),
    ("sessions_list", {"limit": 0}, MAIN, "invalid_argument"),
    ("sessions_list", {"limit": 1001}, MAIN, "invalid_argument"),
    ("sessions_list", {"limit": "5"}, MAIN, "invalid_argument"),
    ("sessions_list", {"limit": True}, MAIN, "invalid_argument"),
    ("sessions_list", {"limit": 2.5}, MAIN, "invalid_argument"),
    ("sessions_list", {"kinds": "subagent"}, MAIN, "invalid_argument"),
    ("sessions_list", {"kinds": ["robot"]}, MAIN, "invalid_argument"),
    ("sessions_list", {"kinds": [1]}, MAIN, "invalid_argument"),
    ("sessions_list", {"agentId": "a:b"}, MAIN, "invalid_argument"),
    ("sessions_list", {"agentId": ""}, MAIN, "invalid_argument"),
    ("sessions_list", {"offset": 3}, MAIN, "invalid_argument"),
    ("sessions_history", {}, MAIN, "invalid_argument"),
    ("sessions_history", {"sessionKey": CHILD, "limit": 0}, MAIN, "invalid_argument"),
    ("sessions_history", {"sessionKey": CHILD, "limit": 201}, MAIN, "invalid_argument"),
    ("sessions_history", {"sessionKey": CHILD, "limit": "2"}, MAIN, "invalid_argument"),
    ("sessions_history", {"sessionKey": "agent:a:ghost"}, MAIN, "not_found"),
    ("sessions_history", {"sessionKey": "nope"}, MAIN, "invalid_argument"),
    ("session_unwatch", {}, MAIN, "invalid_argument"),
    ("session_unwatch", {"sessionKey": "nope"}, MAIN, "invalid_argument"),
    ("session_unwatch", {"sessionKey": "agent:a:ghost"}, MAIN, "not_found"),
    ("session_unwatch", {"sessionKey": CHILD}, "agent:a:ghost", "not_found"),
    ("session_unwatch", {"sessionKey": CHILD, "all": True}, MAIN, "invalid_argument"),
]


HOST_CASES: list[tuple[str, Callable[[Gateway], Any], str]] = [
    ("put_session key", lambda g: g.put_session("bad key"), "invalid_argument"),
    ("put_session global", lambda g: g.put_session("global"), "invalid_argument"),
    ("put_session agent", lambda g: g.put_session(MAIN, agent_id="b"), "invalid_argument"),
    ("put_session kind", lambda g: g.put_session(CHILD, kind="robot"), "invalid_argument"),
    ("put_session spawned_by", lambda g: g.put_session(CHILD, spawned_by="x y"), "invalid_argument"),
    ("put_session label", lambda g: g.put_session(CHILD, label=LONG), "invalid_argument"),
    ("put_session creator", lambda g: g.put_session("agent:a:new", created_by={"type": "robot"}), "invalid_argument"),
    ("put_session creator str", lambda g: g.put_session("agent:a:new", created_by="alice"), "invalid_argument"),
    (
        "put_session creator id",
        lambda g: g.put_session("agent:a:new", created_by={"type": "agent", "id": "x"}),
        "invalid_argument",
    ),
    ("get_session", lambda g: g.get_session("agent:a:ghost"), "not_found"),
    ("inbound unknown", lambda g: g.inbound("agent:a:ghost", "x", channel="t"), "not_found"),
    ("inbound key", lambda g: g.inbound("agent:a:", "x", channel="t"), "invalid_argument"),
    ("inbound big", lambda g: g.inbound(CHILD, BIG, channel="t"), "invalid_argument"),
    ("inbound empty", lambda g: g.inbound(CHILD, "", channel="t"), "invalid_argument"),
    ("inbound text type", lambda g: g.inbound(CHILD, b"x", channel="t"), "invalid_argument"),
    ("inbound channel long", lambda g: g.inbound(CHILD, "x", channel=LONG), "invalid_argument"),
    ("inbound channel none", lambda g: g.inbound(CHILD, "x", channel=None), "invalid_argument"),
    ("inbound channel ctl", lambda g: g.inbound(CHILD, "x", channel="a\nb"), "invalid_argument"),
    ("inbound provenance", lambda g: g.inbound(CHILD, "x", channel="t", provenance="robot"), "invalid_argument"),
    (
        "inbound source",
        lambda g: g.inbound(CHILD, "x", channel="t", provenance="inter_session", source_session_key="x"),
        "invalid_argument",
    ),
    ("inbound human", lambda g: g.inbound(CHILD, "x", channel="t", human_id=LONG), "invalid_argument"),
    ("inbound lane", lambda g: g.inbound(CHILD, "x", channel="t", lane=3), "invalid_argument"),
    ("inbound occurred", lambda g: g.inbound(CHILD, "x", channel="t", occurred_at="now"), "invalid_argument"),
    (
        "inbound occurred nan",
        lambda g: g.inbound(CHILD, "x", channel="t", occurred_at=float("nan")),
        "invalid_argument",
    ),
    ("inbound occurred bool", lambda g: g.inbound(CHILD, "x", channel="t", occurred_at=True), "invalid_argument"),
    ("inbound run", lambda g: g.inbound(CHILD, "x", channel="t", run_id=LONG), "invalid_argument"),
    ("inbound dedupe", lambda g: g.inbound(CHILD, "x", channel="t", dedupe_key=""), "invalid_argument"),
    ("inbound agent", lambda g: g.inbound(CHILD, "x", channel="t", agent_id="b"), "invalid_argument"),
    ("set_goal unknown", lambda g: g.set_goal("agent:a:ghost", "create", objective="o"), "not_found"),
    ("set_goal action", lambda g: g.set_goal(CHILD, "delete"), "invalid_argument"),
    ("set_goal objective", lambda g: g.set_goal(CHILD, "create"), "invalid_argument"),
    (
        "set_goal objective big",
        lambda g: g.set_goal(CHILD, "edit", objective="o" * (64 * 1024 + 1)),
        "invalid_argument",
    ),
    ("set_goal status", lambda g: g.set_goal(CHILD, "status"), "invalid_argument"),
    ("set_goal status long", lambda g: g.set_goal(CHILD, "status", status=LONG), "invalid_argument"),
    ("set_goal actor", lambda g: g.set_goal(CHILD, "clear", actor={"type": "agent", "id": "bad"}), "invalid_argument"),
    ("set_goal actor type", lambda g: g.set_goal(CHILD, "clear", actor={"type": "cat"}), "invalid_argument"),
    ("set_goal actor list", lambda g: g.set_goal(CHILD, "clear", actor=["human"]), "invalid_argument"),
    ("set_goal edit none", lambda g: g.set_goal(PEER, "edit", objective="o"), "invalid_argument"),
    ("begin_run unknown", lambda g: g.begin_run("agent:a:ghost", "r"), "not_found"),
    ("begin_run id", lambda g: g.begin_run(CHILD, LONG), "invalid_argument"),
    ("end_run unknown", lambda g: g.end_run("agent:a:ghost", "run-1", "ok"), "not_found"),
    ("end_run status", lambda g: g.end_run(CHILD, "run-1", "fine"), "invalid_argument"),
    ("end_run id", lambda g: g.end_run(CHILD, None, "ok"), "invalid_argument"),
    ("compaction unknown", lambda g: g.record_compaction("agent:a:ghost", "op"), "not_found"),
    ("compaction id", lambda g: g.record_compaction(CHILD, LONG), "invalid_argument"),
    ("compaction id type", lambda g: g.record_compaction(CHILD, 3), "invalid_argument"),
    ("reset unknown", lambda g: g.reset_session("agent:a:ghost"), "not_found"),
    ("reset key", lambda g: g.reset_session("agent:a"), "invalid_argument"),
    ("delete key", lambda g: g.delete_session("agent :a:x"), "invalid_argument"),
    ("delete global", lambda g: g.delete_session("global"), "invalid_argument"),
    ("append unknown", lambda g: g.append_message("agent:a:ghost", "assistant", "x"), "not_found"),
    ("append role", lambda g: g.append_message(CHILD, "bot", "x"), "invalid_argument"),
    ("append text", lambda g: g.append_message(CHILD, "assistant", None), "invalid_argument"),
    ("append big", lambda g: g.append_message(CHILD, "assistant", BIG), "invalid_argument"),
    ("enqueue key", lambda g: g.enqueue_system_event("x", "t"), "invalid_argument"),
    ("enqueue empty", lambda g: g.enqueue_system_event(MAIN, ""), "invalid_argument"),
    ("enqueue big", lambda g: g.enqueue_system_event(MAIN, BIG), "invalid_argument"),
    ("enqueue ctx", lambda g: g.enqueue_system_event(MAIN, "t", context_key="c" * 2049), "invalid_argument"),
    ("enqueue ctx type", lambda g: g.enqueue_system_event(MAIN, "t", context_key=5), "invalid_argument"),
    ("peek key", lambda g: g.peek_system_events("nope"), "invalid_argument"),
    ("drain key", lambda g: g.drain_system_events(""), "invalid_argument"),
    ("drain global", lambda g: g.drain_system_events("global"), "invalid_argument"),
    ("watch watcher", lambda g: g.watch("x", CHILD), "invalid_argument"),
    ("watch target", lambda g: g.watch(MAIN, "agent:a"), "invalid_argument"),
    ("unwatch key", lambda g: g.unwatch(MAIN, 3), "invalid_argument"),
    ("acknowledge key", lambda g: g.acknowledge("bad", [CHILD]), "invalid_argument"),
    ("cursors key", lambda g: g.cursors(watcher="a b"), "invalid_argument"),
    ("state_version key", lambda g: g.state_version("agent:a::b"), "invalid_argument"),
    ("state_version global", lambda g: g.state_version("global"), "invalid_argument"),
    ("changes_since key", lambda g: g.changes_since("nope", 0), "invalid_argument"),
    ("changes_since neg", lambda g: g.changes_since(CHILD, -1), "invalid_argument"),
    ("changes_since float", lambda g: g.changes_since(CHILD, 1.0), "invalid_argument"),
    ("changes_since str", lambda g: g.changes_since(CHILD, "3"), "invalid_argument"),
    ("changes_since bool", lambda g: g.changes_since(CHILD, True), "invalid_argument"),
    ("events_after neg", lambda g: g.events_after(-1), "invalid_argument"),
    ("events_after limit", lambda g: g.events_after(0, 0), "invalid_argument"),
    ("events_after limit big", lambda g: g.events_after(0, 1001), "invalid_argument"),
    ("subscribe key", lambda g: g.subscribe_wakes("nope", lambda w: None), "invalid_argument"),
]


class BadInputTests(SuiteBase):
    """Bad input to every tool and host operation: a clear error with a stable code, and nothing changes."""

    @pytest.fixture
    def busy(self, gw: Gateway) -> Gateway:
        """A store with a bit of everything: sessions, events, cursors, pending notices, transcripts."""
        gw.put_session(MAIN)
        gw.put_session(PEER)
        gw.put_session(GROUP)
        spawn(gw, MAIN, "kid", run_id="run-1", task="t")
        send(gw, PEER, CHILD, watch=True)
        human(gw, CHILD)
        human(gw, GROUP)
        gw.set_goal(CHILD, "create", objective="o")
        gw.enqueue_system_event(PEER, "cron: x", context_key="cron:x")
        return gw

    def test_bad_tool_calls_fail_cleanly_and_change_nothing(self, busy: Gateway, subtests: pytest.Subtests) -> None:
        """One store for the whole table (a fresh one per case is slow on PostgreSQL): every case is checked
        against the same snapshot, so the first case that changes anything is the one reported."""
        before = snapshot(busy, KEYS)
        for i, (tool, args, caller, code) in enumerate(TOOL_CASES):
            with subtests.test(msg=f"{i}: {tool} {str(args)[:60]} as {caller}"):
                out = busy.call_tool(tool, args, caller=caller)
                assert set(out) == {"error"}, out
                assert out["error"]["code"] == code, out
                assert isinstance(out["error"]["message"], str) and len(out["error"]["message"]) > 10
                assert snapshot(busy, KEYS) == before

    def test_a_caller_agent_mismatch_is_refused(self, busy: Gateway) -> None:
        before = snapshot(busy, KEYS)
        out = busy.call_tool("session_status", {}, caller=MAIN, agent_id="b")
        assert out["error"]["code"] == "invalid_argument"
        out = busy.call_tool("session_status", {}, caller="global", agent_id="a:b")
        assert out["error"]["code"] == "invalid_argument"
        assert snapshot(busy, KEYS) == before

    def test_bad_host_operations_raise_a_coded_error_and_change_nothing(
        self, busy: Gateway, subtests: pytest.Subtests
    ) -> None:
        before = snapshot(busy, KEYS)
        for name, op, code in HOST_CASES:
            with subtests.test(msg=name):
                with pytest.raises(SessionwatchError) as info:
                    op(busy)
                assert info.value.code == code, (name, info.value)
                assert info.value.message
                assert snapshot(busy, KEYS) == before

    def test_limits_are_inclusive(self, busy: Gateway) -> None:
        """Exactly at the limits is fine: 1 MiB of text, 200-character names, a 512-character key."""
        gw = busy
        mib = "y" * (1024 * 1024)
        assert gw.inbound(CHILD, mib, channel="c" * 200, run_id="r" * 200)["messageId"] > 0
        key = "agent:a:" + "k" * (512 - len("agent:a:"))
        gw.put_session(key, label="l" * 200)
        assert gw.get_session(key)["label"] == "l" * 200
        assert gw.call_tool("sessions_send", {"sessionKey": CHILD, "message": mib}, caller=MAIN)["status"] == "accepted"
