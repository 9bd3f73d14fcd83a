"""The signal log: sequences, heads, dedupe, clamping, summaries, every kind, and its producers."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sessionwatch import Gateway, InvalidArgument, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.store.records import EventInput

from .helpers import AGENT, CHILD, DAY, HOUR, MAIN, cursor, human, log, marks, notice, ok, spawn, status, texts
from .suite import SuiteBase


class SignalLogTests(SuiteBase):
    """The signal log: sequences, heads, dedupe, clamping, summaries, every kind, and its producers."""

    # -- sequences and heads ---------------------------------------------------------------------------------
    def test_sequences_are_global_and_strictly_increasing(self, gw: Gateway) -> None:
        for key, agent in [("agent:a:one", None), ("agent:b:two", None), ("global", "a"), ("global", "b")]:
            gw.put_session(key, agent_id=agent)
        seqs = []
        for i in range(3):
            for key, agent in [("agent:a:one", None), ("agent:b:two", None), ("global", "a"), ("global", "b")]:
                seqs.append(gw.record_compaction(key, f"op-{i}-{key}-{agent}", agent_id=agent)["event"]["sequence"])
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert [e["sequence"] for e in log(gw)] == seqs
        # one session's versions are sparse: its head is its last global sequence
        assert gw.state_version("agent:a:one") == seqs[8]
        assert gw.state_version("global", agent_id="b") == seqs[11]

    def test_sequences_are_never_reused_after_prune_and_delete(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=2)) as gw:
            gw.put_session("agent:a:x")
            gw.put_session("agent:a:y")
            seqs = [gw.record_compaction("agent:a:x", f"op{i}")["event"]["sequence"] for i in range(5)]
            gw.prune(force=True)
            assert [e["sequence"] for e in log(gw)] == seqs[-2:]
            after_prune = gw.record_compaction("agent:a:y", "p")["event"]["sequence"]
            assert after_prune > seqs[-1]
            assert gw.delete_session("agent:a:y") == {"deleted": True}
            after_delete = gw.record_compaction("agent:a:x", "d")["event"]["sequence"]
            assert after_delete > after_prune
        # and across a restart
        with self.open_gateway(clock=clock) as gw:
            assert gw.record_compaction("agent:a:x", "r")["event"]["sequence"] > after_delete

    def test_heads_never_decrease_and_survive_pruning(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            gw.put_session("agent:a:x")
            head = gw.record_compaction("agent:a:x", "op")["event"]["sequence"]
            assert gw.state_version("agent:a:x") == head
            clock.advance(31 * DAY)
            gw.prune(force=True)
            assert log(gw, "agent:a:x") == []
            assert gw.state_version("agent:a:x") == head
            assert status(gw, "agent:a:x", "agent:a:x")["stateVersion"] == head
            rows = ok(gw.call_tool("sessions_list", {}, caller="agent:a:x"))["sessions"]
            assert rows[0]["stateVersion"] == head
        with self.open_gateway(clock=clock) as gw:  # the reopen sweep prunes again
            assert gw.state_version("agent:a:x") == head

    def test_state_version_is_zero_for_unknown_sessions(self, gw: Gateway) -> None:
        assert gw.state_version("agent:a:never") == 0
        assert gw.state_version("global", agent_id="zz") == 0

    def test_a_session_reads_with_its_state_version_in_one_call(self, gw: Gateway) -> None:
        """``get_session_with_version`` (session_status's one read) agrees with ``get_session`` and
        ``state_version``: 0 before the first event, per agent for the bare global key, None when the
        session does not exist."""
        store = gw.store
        assert store.get_session_with_version(MAIN, AGENT) is None
        gw.put_session(MAIN)
        gw.put_session("global", agent_id="a")
        gw.put_session("global", agent_id="b")
        assert store.get_session_with_version(MAIN, AGENT) == (store.get_session(MAIN, AGENT), 0)
        spawn(gw, MAIN, "kid", run_id="run-1")
        human(gw, MAIN)
        gw.set_goal("global", "create", objective="o", agent_id="b")
        for key, agent in [(MAIN, AGENT), (CHILD, AGENT), ("global", "a"), ("global", "b")]:
            row = store.get_session(key, agent)
            assert row is not None
            assert store.get_session_with_version(key, agent) == (row, gw.state_version(key, agent_id=agent))
        assert gw.state_version(CHILD) > 0 and gw.state_version("global", agent_id="b") > 0
        assert store.get_session_with_version("global", "a") == (store.get_session("global", "a"), 0)
        assert store.get_session_with_version("global", "zz") is None
        assert store.get_session_with_version(MAIN, "other") is None

    # -- dedupe ----------------------------------------------------------------------------------------------
    def test_duplicate_dedupe_key_returns_the_original_and_changes_nothing(self, family: Gateway) -> None:
        gw = family
        first = human(gw, CHILD, dedupe_key="turn-1")
        assert first["recorded"] is True
        seq = first["event"]["sequence"]
        assert texts(gw, MAIN) == [notice(CHILD, seq - 1)]
        gw.drain_system_events(MAIN)
        before = (log(gw), gw.cursors(), gw.state_version(CHILD))
        again = human(gw, CHILD, dedupe_key="turn-1")
        assert again["event"]["sequence"] == seq
        assert again["event"]["dedupeKey"] == "turn-1"
        assert (log(gw), gw.cursors(), gw.state_version(CHILD)) == before
        assert texts(gw, MAIN) == []

    def test_compaction_dedupes_per_operation_id(self, gw: Gateway) -> None:
        gw.put_session("agent:a:x")
        first = gw.record_compaction("agent:a:x", "op-1")
        assert first["recorded"] is True
        dup = gw.record_compaction("agent:a:x", "op-1")
        assert dup["recorded"] is False
        assert dup["event"]["sequence"] == first["event"]["sequence"]
        other = gw.record_compaction("agent:a:x", "op-2")
        assert other["recorded"] is True
        assert [e["kind"] for e in log(gw)] == ["compacted", "compacted"]
        assert [e["dedupeKey"] for e in log(gw)] == ["compacted:agent:a:x op-1", "compacted:agent:a:x op-2"]
        assert gw.state_version("agent:a:x") == other["event"]["sequence"]

    # -- occurredAt ------------------------------------------------------------------------------------------
    def test_occurred_at_is_clamped_into_the_last_24_hours(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        now = clock()
        old = human(gw, CHILD, occurred_at=now - 3 * DAY)["event"]
        assert old["occurredAt"] == now - DAY
        future = human(gw, CHILD, occurred_at=now + 5 * HOUR)["event"]
        assert future["occurredAt"] == now
        inside = human(gw, CHILD, occurred_at=now - HOUR)["event"]
        assert inside["occurredAt"] == now - HOUR
        edge = human(gw, CHILD, occurred_at=now - DAY)["event"]
        assert edge["occurredAt"] == now - DAY
        frac = human(gw, CHILD, occurred_at=now - 1.5)["event"]
        assert frac["occurredAt"] == math.floor(now - 1.5) and isinstance(frac["occurredAt"], int)
        inf = human(gw, CHILD, occurred_at=math.inf)["event"]
        assert inf["occurredAt"] == now
        assert human(gw, CHILD)["event"]["occurredAt"] == now

    def test_bookkeeping_uses_local_now_not_the_event_time(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        clock.advance(HOUR)
        human(gw, CHILD, occurred_at=clock() - 20 * HOUR)
        assert cursor(gw, MAIN, CHILD)["updatedAt"] == clock()  # type: ignore[index]

    def test_clamping_applies_to_direct_records_too(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session("agent:a:x")
        for given, want in [
            (0, clock() - DAY),
            (clock() * 2, clock()),
            (math.nan, clock()),
            ("x", clock()),
            (None, clock()),
            (True, clock()),
        ]:
            ev = gw.record(EventInput("agent:a:x", AGENT, "compacted", "system", "session compacted", given))  # type: ignore[arg-type]
            assert ev is not None and ev.event is not None
            assert ev.event.occurred_at == want, given

    # -- content-free summaries and kinds --------------------------------------------------------------------
    def test_no_message_content_reaches_the_log(self, family: Gateway) -> None:
        gw = family
        secret = "TOP-SECRET-PAYLOAD-8841"
        gw.inbound(CHILD, f"please {secret}", channel="telegram")
        gw.set_goal(CHILD, "create", objective=f"objective {secret}")
        gw.set_goal(CHILD, "edit", objective=f"new objective {secret}")
        gw.call_tool("sessions_send", {"sessionKey": CHILD, "message": secret}, caller=MAIN)
        dumped = json.dumps(log(gw))
        assert secret not in dumped
        assert "please" not in dumped
        for e in log(gw):
            assert e["summary"] == e["summary"].lower() and "\n" not in e["summary"]

    def test_every_producer_kind_with_actor_payload_and_summary(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:a:made", created_by={"type": "human", "id": "alice"})
        human(gw, CHILD, channel=" webchat ", human_id="u-7", run_id="r-h")
        gw.set_goal(CHILD, "create", objective="ship it")
        gw.set_goal(CHILD, "edit", objective="ship it well", actor={"type": "human", "id": "bob"})
        gw.set_goal(CHILD, "status", status="done", actor={"type": "agent", "id": "agent:a:other"})
        gw.set_goal(CHILD, "clear")
        gw.end_run(CHILD, "run-1", "ok")
        gw.record_compaction(CHILD, "c1")
        spawn(gw, MAIN, "kid", run_id="run-2")
        gw.end_run(CHILD, "run-2", "error")
        spawn(gw, MAIN, "kid", run_id="run-3")
        gw.end_run(CHILD, "run-3", "timeout")
        spawn(gw, MAIN, "kid", run_id="run-4")
        gw.end_run(CHILD, "run-4", "cancelled")
        got = [
            (
                e["sessionKey"],
                e["kind"],
                e["actorType"],
                e.get("actorId"),
                e.get("runId"),
                e.get("payload"),
                e["summary"],
            )
            for e in log(gw)
        ]
        assert got == [
            (CHILD, "created", "agent", MAIN, None, None, "session created"),
            (CHILD, "child_spawned", "agent", MAIN, "run-1", None, "child session spawned"),
            ("agent:a:made", "created", "human", "alice", None, None, "session created"),
            (CHILD, "human_direct_message", "human", "u-7", "r-h", None, "human message via webchat"),
            (CHILD, "goal_changed", "system", None, None, None, "goal created"),
            (CHILD, "goal_changed", "human", "bob", None, None, "goal objective changed"),
            (CHILD, "goal_changed", "agent", "agent:a:other", None, None, "goal status changed to done"),
            (CHILD, "goal_changed", "system", None, None, None, "goal cleared"),
            (CHILD, "run_completed", "system", None, "run-1", None, "child run completed"),
            (CHILD, "compacted", "system", None, None, None, "session compacted"),
            (CHILD, "child_spawned", "agent", MAIN, "run-2", None, "child session spawned"),
            (CHILD, "run_failed", "system", None, "run-2", {"outcome": "error"}, "child run failed"),
            (CHILD, "child_spawned", "agent", MAIN, "run-3", None, "child session spawned"),
            (CHILD, "run_failed", "system", None, "run-3", {"outcome": "timeout"}, "child run timed out"),
            (CHILD, "child_spawned", "agent", MAIN, "run-4", None, "child session spawned"),
            (CHILD, "run_failed", "system", None, "run-4", {"outcome": "cancelled"}, "child run cancelled"),
        ]
        dedupe = {e["kind"]: e.get("dedupeKey") for e in log(gw, CHILD)}
        assert dedupe["child_spawned"] == f"child-spawned:{CHILD} run-4"
        assert dedupe["run_failed"] == f"run-terminal:{CHILD} run-4"
        assert dedupe["compacted"] == f"compacted:{CHILD} c1"
        sid = gw.get_session(CHILD)["sessionId"]
        assert log(gw, CHILD)[0]["dedupeKey"] == f"created:{AGENT}:{CHILD}:{sid}"

    def test_upstream_kinds_notify_or_stay_in_the_log(self, family: Gateway) -> None:
        """adopted/imported are log-only, upstream_missing notifies; payloads are projected on read."""
        gw = family
        base = gw.state_version(CHILD)
        gw.record(
            EventInput(
                CHILD,
                AGENT,
                "adopted",
                "human",
                "adopted from claude",
                0,
                dedupe_key=f"adopted:{CHILD}",
                payload={"catalogId": "claude", "hostId": "gateway:local"},
            )
        )
        gw.record(EventInput(CHILD, AGENT, "imported", "system", "history imported", 0))
        assert marks(gw, MAIN, CHILD) == (base, base, base)
        assert texts(gw, MAIN) == []
        missing = gw.record(
            EventInput(
                CHILD,
                AGENT,
                "upstream_missing",
                "system",
                "upstream missing via claude",
                0,
                payload={"channel": "claude", "secret": "x"},
            )
        )
        assert missing is not None and missing.event is not None
        assert texts(gw, MAIN) == [notice(CHILD, base)]
        events = status(gw, MAIN, CHILD, since=base)["stateChanges"]["events"]
        assert [e["kind"] for e in events] == ["adopted", "imported", "upstream_missing"]
        assert "payload" not in events[0]  # catalogId / hostId are not visible
        assert events[2]["payload"] == {"channel": "claude"}
        full = log(gw, CHILD)
        assert full[-3]["payload"] == {"catalogId": "claude", "hostId": "gateway:local"}

    # -- producers: human direct messages --------------------------------------------------------------------
    def test_human_message_in_a_parented_session_notifies_the_parent(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        out = human(gw, CHILD)
        assert out["recorded"] is True and out["actorType"] == "human"
        assert out["event"]["kind"] == "human_direct_message"
        assert texts(gw, MAIN) == [notice(CHILD, spawned)]

    def test_unwatched_unparented_session_stays_write_free(self, gw: Gateway) -> None:
        gw.put_session("agent:a:dm:bob")
        out = human(gw, "agent:a:dm:bob", provenance="external_user")
        assert out == {"recorded": False, "event": None, "messageId": out["messageId"], "actorType": "human"}
        assert gw.state_version("agent:a:dm:bob") == 0
        assert log(gw) == [] and gw.cursors() == []
        assert status(gw, "agent:a:dm:bob", "agent:a:dm:bob", since=0)["stateChanges"]["events"] == []
        # the turn itself still reached the transcript
        hist = ok(gw.call_tool("sessions_history", {"sessionKey": "agent:a:dm:bob"}, caller="agent:a:dm:bob"))
        assert [m["text"] for m in hist["messages"]] == ["a person typed this"]

    def test_a_watched_unparented_session_records_human_messages(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session("agent:a:dm:bob")
        assert (
            ok(
                gw.call_tool(
                    "sessions_send", {"sessionKey": "agent:a:dm:bob", "message": "x", "watch": True}, caller=MAIN
                )
            )["watched"]
            is True
        )
        out = human(gw, "agent:a:dm:bob")
        assert out["recorded"] is True
        assert texts(gw, MAIN) == [notice("agent:a:dm:bob", 0)]

    @pytest.mark.parametrize(
        "how",
        [
            {"provenance": "inter_session", "source_session_key": "agent:a:peer"},
            {"provenance": "internal_system"},
            {"lane": "subagent"},
        ],
    )
    def test_non_human_turns_are_never_human_messages(self, family: Gateway, how: dict[str, Any]) -> None:
        gw = family
        before = (log(gw), gw.cursors())
        out = gw.inbound(CHILD, "x", channel="internal", **how)
        assert out["recorded"] is False and out["event"] is None
        assert out["actorType"] in ("agent", "system")
        assert (log(gw), gw.cursors()) == before
        assert texts(gw, MAIN) == []

    def test_sessions_send_is_not_a_human_message(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:a:peer")
        before = log(gw)
        send_out = ok(gw.call_tool("sessions_send", {"sessionKey": CHILD, "message": "hello"}, caller="agent:a:peer"))
        assert send_out["status"] == "accepted"
        assert log(gw) == before and texts(gw, MAIN) == []

    # -- producers: goals ------------------------------------------------------------------------------------
    def test_goal_changes_always_record(self, gw: Gateway) -> None:
        gw.put_session("agent:a:lonely")
        out = gw.set_goal("agent:a:lonely", "create", objective="o")
        assert out["recorded"] is True and out["goal"] == {"objective": "o", "status": "active"}
        gw.set_goal("agent:a:lonely", "status", status="blocked")
        assert gw.get_session("agent:a:lonely")["goal"] == {"objective": "o", "status": "blocked"}
        gw.set_goal("agent:a:lonely", "edit", objective="p")
        assert gw.get_session("agent:a:lonely")["goal"] == {"objective": "p", "status": "blocked"}
        cleared = gw.set_goal("agent:a:lonely", "clear")
        assert cleared["goal"] is None and "goal" not in gw.get_session("agent:a:lonely")
        assert [e["summary"] for e in log(gw)] == [
            "goal created",
            "goal status changed to blocked",
            "goal objective changed",
            "goal cleared",
        ]
        assert gw.state_version("agent:a:lonely") == log(gw)[-1]["sequence"]
        assert gw.cursors() == []

    def test_editing_a_missing_goal_is_refused_and_changes_nothing(self, gw: Gateway) -> None:
        gw.put_session("agent:a:x")
        for action, kw in [("edit", {"objective": "o"}), ("status", {"status": "done"})]:
            with pytest.raises(InvalidArgument, match="no goal"):
                gw.set_goal("agent:a:x", action, **kw)
        assert log(gw) == [] and "goal" not in gw.get_session("agent:a:x")

    # -- producers: spawn ------------------------------------------------------------------------------------
    def test_spawn_records_created_then_child_spawned_and_seeds_the_caller(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        out = spawn(gw, MAIN, "kid", run_id="r1", task="do the thing")
        assert out["sessionKey"] == CHILD and out["runId"] == "r1"
        events = log(gw, CHILD)
        assert [e["kind"] for e in events] == ["created", "child_spawned"]
        seq = events[1]["sequence"]
        assert out["stateVersion"] == seq == gw.state_version(CHILD)
        c = cursor(gw, MAIN, CHILD)
        assert c is not None
        assert (c["lastSeen"], c["notified"], c["material"], c["provenance"]) == (seq, seq, seq, "explicit")
        assert texts(gw, MAIN) == []
        session = gw.get_session(CHILD)
        assert session["spawnedBy"] == MAIN and session["kind"] == "subagent" and session["activeRunId"] == "r1"
        hist = ok(gw.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN))["messages"]
        assert [(m["text"], m["provenance"], m["sourceSessionKey"]) for m in hist] == [
            ("do the thing", "inter_session", MAIN)
        ]

    def test_respawn_with_a_new_run_reseeds_and_the_same_run_is_a_no_op(self, family: Gateway) -> None:
        gw = family
        first = gw.state_version(CHILD)
        human(gw, CHILD)
        assert marks(gw, MAIN, CHILD) == (first, first + 1, first + 1)
        again = spawn(gw, MAIN, "kid", run_id="run-1")
        assert again["stateVersion"] == first + 1
        assert marks(gw, MAIN, CHILD) == (first, first + 1, first + 1)
        assert [e["kind"] for e in log(gw, CHILD)] == ["created", "child_spawned", "human_direct_message"]
        respawn = spawn(gw, MAIN, "kid", run_id="run-2")
        seq = respawn["stateVersion"]
        assert seq > first + 1
        assert marks(gw, MAIN, CHILD) == (seq, seq, seq)  # pending state is dropped on purpose
        assert [e["kind"] for e in log(gw, CHILD)][-1] == "child_spawned"
        human(gw, CHILD)
        assert texts(gw, MAIN)[-1] == notice(CHILD, seq)

    def test_a_different_parent_cannot_spawn_into_an_existing_child(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:a:other")
        before = (log(gw), gw.cursors())
        out = gw.call_tool("sessions_spawn", {"label": "kid"}, caller="agent:a:other")
        assert out["error"]["code"] == "conflict"
        assert (log(gw), gw.cursors()) == before

    # -- producers: child run outcomes -----------------------------------------------------------------------
    @pytest.mark.parametrize(
        ("status_", "kind", "payload"),
        [
            ("ok", "run_completed", None),
            ("error", "run_failed", {"outcome": "error"}),
            ("timeout", "run_failed", {"outcome": "timeout"}),
            ("cancelled", "run_failed", {"outcome": "cancelled"}),
        ],
    )
    def test_child_run_outcomes_are_log_only(
        self, family: Gateway, status_: str, kind: str, payload: dict[str, Any] | None
    ) -> None:
        gw = family
        before = marks(gw, MAIN, CHILD)
        out = gw.end_run(CHILD, "run-1", status_)
        assert out["recorded"] is True and out["wasActive"] is True
        assert out["event"]["kind"] == kind and out["event"].get("payload") == payload
        assert gw.state_version(CHILD) == out["event"]["sequence"]
        assert marks(gw, MAIN, CHILD) == before
        assert texts(gw, MAIN) == []
        assert "activeRunId" not in gw.get_session(CHILD)
        projected = status(gw, MAIN, CHILD, since=out["event"]["sequence"] - 1)["stateChanges"]["events"]
        assert projected[0].get("payload") == payload

    def test_the_first_outcome_per_run_wins(self, family: Gateway) -> None:
        gw = family
        first = gw.end_run(CHILD, "run-1", "timeout")
        later = gw.end_run(CHILD, "run-1", "ok")
        assert later["recorded"] is False and later["wasActive"] is False
        assert later["event"]["sequence"] == first["event"]["sequence"]
        assert later["event"]["kind"] == "run_failed" and later["event"]["payload"] == {"outcome": "timeout"}
        assert [e["kind"] for e in log(gw, CHILD)].count("run_failed") == 1
        assert "run_completed" not in [e["kind"] for e in log(gw, CHILD)]

    # -- producers: creation ---------------------------------------------------------------------------------
    def test_created_is_recorded_only_with_a_creator_and_only_once(self, gw: Gateway) -> None:
        gw.put_session("agent:a:plain")
        assert log(gw) == []
        out = gw.put_session("agent:a:made", created_by={"type": "agent", "id": MAIN})
        assert out["created"] is True
        again = gw.put_session("agent:a:made", created_by={"type": "agent", "id": MAIN}, label="renamed")
        assert again["created"] is False and again["label"] == "renamed"
        events = log(gw)
        assert [(e["sessionKey"], e["kind"], e["actorType"], e["actorId"]) for e in events] == [
            ("agent:a:made", "created", "agent", MAIN)
        ]
        sys_made = gw.put_session("agent:a:sys", created_by={"type": "system"})
        assert sys_made["created"] is True
        assert log(gw)[-1]["actorType"] == "system" and "actorId" not in log(gw)[-1]
