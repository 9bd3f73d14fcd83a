"""Watchers: seeding, explicit and ambient watches, the frozen watermark, self-suppression,
acknowledge-and-reopen, reset/delete cleanup, the global-scope rule and session_unwatch."""

from __future__ import annotations

from typing import Any

import pytest

from sessionwatch import Gateway, Wake
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, cursor, err, human, log, marks, notice, ok, send, spawn, status, texts
from .suite import SuiteBase

PEER = "agent:a:peer"
GROUP = "agent:a:telegram:group:g1"


class WatcherTests(SuiteBase):
    """Watchers: seeding, explicit and ambient watches, the frozen watermark, self-suppression, cleanup."""

    @pytest.fixture
    def peer_family(self, gw: Gateway) -> Gateway:
        """main spawned CHILD (run-1); PEER exists and watches nothing yet."""
        gw.put_session(MAIN)
        gw.put_session(PEER)
        spawn(gw, MAIN, "kid", run_id="run-1")
        return gw

    # -- explicit watch --------------------------------------------------------------------------------------
    def test_send_with_watch_seeds_at_the_head(self, peer_family: Gateway) -> None:
        gw = peer_family
        head = gw.state_version(CHILD)
        out = send(gw, PEER, CHILD, watch=True)
        assert out["watched"] is True and out["status"] == "accepted"
        c = cursor(gw, PEER, CHILD)
        assert c is not None and (c["lastSeen"], c["notified"], c["material"], c["provenance"]) == (
            head,
            head,
            head,
            "explicit",
        )
        human(gw, CHILD)
        assert texts(gw, PEER) == [notice(CHILD, head)]  # earlier history never produces a notice

    @pytest.mark.parametrize("extra", [{}, {"watch": False}])
    def test_watched_is_present_only_when_watch_true_was_passed(
        self, peer_family: Gateway, extra: dict[str, Any]
    ) -> None:
        out = send(peer_family, PEER, CHILD, **extra)
        assert "watched" not in out
        assert cursor(peer_family, PEER, CHILD) is None

    def test_rewatching_does_not_clobber_a_pending_notice(self, peer_family: Gateway) -> None:
        gw = peer_family
        send(gw, PEER, CHILD, watch=True)
        head = gw.state_version(CHILD)
        human(gw, CHILD)
        pending = marks(gw, PEER, CHILD)
        queue = texts(gw, PEER)
        assert send(gw, PEER, CHILD, watch=True)["watched"] is True
        assert marks(gw, PEER, CHILD) == pending
        assert texts(gw, PEER) == queue == [notice(CHILD, head)]

    def test_watching_yourself_is_refused(self, peer_family: Gateway) -> None:
        out = send(peer_family, PEER, PEER, watch=True)
        assert out["watched"] is False
        assert peer_family.cursors(watcher=PEER) == []

    def test_a_failed_send_registers_no_watch(self, peer_family: Gateway) -> None:
        out = peer_family.call_tool(
            "sessions_send", {"sessionKey": "agent:a:ghost", "message": "x", "watch": True}, caller=PEER
        )
        err(out, "not_found")
        assert "watched" not in out
        assert peer_family.cursors(watcher=PEER) == []

    # -- the frozen watermark --------------------------------------------------------------------------------
    def test_material_updates_while_pending_keep_one_byte_identical_notice(self, peer_family: Gateway) -> None:
        gw = peer_family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        gw.set_goal(CHILD, "create", objective="o")
        gw.set_goal(CHILD, "status", status="done", actor={"type": "human", "id": "ann"})
        last = human(gw, CHILD)["event"]["sequence"]
        assert marks(gw, MAIN, CHILD) == (spawned, first, last)
        assert texts(gw, MAIN) == [notice(CHILD, spawned)]

    def test_acknowledge_on_drain_reopens_exactly_once(self, peer_family: Gateway) -> None:
        gw = peer_family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        drained = gw.drain_system_events(MAIN)
        assert [e["text"] for e in drained] == [notice(CHILD, spawned)]
        assert marks(gw, MAIN, CHILD) == (first, first, first)  # nothing newer: no reopen
        assert texts(gw, MAIN) == []
        # a notice pending, then more material arrives before the drain
        second = human(gw, CHILD)["event"]["sequence"]
        third = gw.set_goal(CHILD, "create", objective="o")["event"]["sequence"]
        assert texts(gw, MAIN) == [notice(CHILD, first)]
        drained = gw.drain_system_events(MAIN)
        assert [e["text"] for e in drained] == [notice(CHILD, first)]
        assert marks(gw, MAIN, CHILD) == (second, third, third)  # acked the frozen watermark, not the head
        assert texts(gw, MAIN) == [notice(CHILD, second)]  # exactly one reopen: changesSince N
        fourth = human(gw, CHILD)["event"]["sequence"]
        assert texts(gw, MAIN) == [notice(CHILD, second)]  # the reopened text stays frozen
        assert marks(gw, MAIN, CHILD) == (second, third, fourth)
        gw.drain_system_events(MAIN)
        assert marks(gw, MAIN, CHILD) == (third, fourth, fourth)
        assert texts(gw, MAIN) == [notice(CHILD, third)]
        gw.drain_system_events(MAIN)
        assert marks(gw, MAIN, CHILD) == (fourth, fourth, fourth)
        assert texts(gw, MAIN) == []
        # reconciliation of the reopened notice shows exactly the interleaved events
        events = status(gw, MAIN, CHILD, since=second)["stateChanges"]["events"]
        assert [e["sequence"] for e in events] == [third, fourth]

    def test_lost_notice_self_heals_on_the_next_material_event(self, peer_family: Gateway) -> None:
        gw = peer_family
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        for i in range(20):  # push the notice out of the 20-entry queue
            gw.enqueue_system_event(MAIN, f"cron tick {i}", context_key="cron:tick")
        assert notice(CHILD, spawned) not in texts(gw, MAIN)
        human(gw, CHILD)
        assert texts(gw, MAIN)[-1] == notice(CHILD, spawned)
        assert texts(gw, MAIN).count(notice(CHILD, spawned)) == 1

    # -- self-suppression ------------------------------------------------------------------------------------
    def test_an_agents_own_change_does_not_notify_it(self, peer_family: Gateway) -> None:
        gw = peer_family
        send(gw, PEER, CHILD, watch=True)
        before = cursor(gw, MAIN, CHILD)
        out = gw.set_goal(CHILD, "create", objective="o", actor={"type": "agent", "id": MAIN})
        seq = out["event"]["sequence"]
        assert out["recorded"] is True and gw.state_version(CHILD) == seq
        assert cursor(gw, MAIN, CHILD) == before  # untouched, not even updatedAt
        assert texts(gw, MAIN) == []
        assert texts(gw, PEER) == [notice(CHILD, seq - 1)]  # the other watcher still hears of it
        # and the same for a registered (not producer) watcher acting itself
        out = gw.set_goal(CHILD, "edit", objective="p", actor={"type": "agent", "id": PEER})
        assert marks(gw, PEER, CHILD) == (seq - 1, seq, seq)
        assert texts(gw, MAIN) == [notice(CHILD, seq - 1)]

    def test_a_spawn_parent_with_no_cursor_is_recreated_from_zero(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.reset_session(MAIN)
        assert gw.cursors(watcher=MAIN) == []
        seq = human(gw, CHILD)["event"]["sequence"]
        assert marks(gw, MAIN, CHILD) == (0, seq, seq)
        assert texts(gw, MAIN) == [notice(CHILD, 0)]

    # -- ambient group watch ---------------------------------------------------------------------------------
    def test_first_human_group_message_reaches_main_queue_only(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        assert gw.get_session(GROUP)["kind"] == "group"
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        out = human(gw, GROUP)
        assert out["recorded"] is True
        c = cursor(gw, MAIN, GROUP)
        assert c is not None and c["provenance"] == "ambient-group"
        assert (c["lastSeen"], c["notified"], c["material"]) == (0, out["event"]["sequence"], out["event"]["sequence"])
        assert texts(gw, MAIN) == [notice(GROUP, 0)]
        human(gw, GROUP)
        assert texts(gw, MAIN) == [notice(GROUP, 0)]
        assert wakes == []  # queue-only: never woken

    def test_ambient_notices_replace_older_ones(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        first = human(gw, GROUP)["event"]["sequence"]
        gw.enqueue_system_event(MAIN, "cron: nightly report ready", context_key="cron:nightly")
        second = human(gw, GROUP)["event"]["sequence"]
        assert texts(gw, MAIN) == [notice(GROUP, 0), "cron: nightly report ready"]
        # acknowledging without consuming the queue reopens: the old entry is replaced, not duplicated
        gw.acknowledge(MAIN, [GROUP])
        assert marks(gw, MAIN, GROUP) == (first, second, second)
        assert texts(gw, MAIN) == ["cron: nightly report ready", notice(GROUP, first)]

    def test_an_explicit_watch_promotes_ambient_and_keeps_watermarks(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        human(gw, GROUP)
        before = marks(gw, MAIN, GROUP)
        assert send(gw, MAIN, GROUP, watch=True)["watched"] is True
        c = cursor(gw, MAIN, GROUP)
        assert c is not None and c["provenance"] == "explicit"
        assert marks(gw, MAIN, GROUP) == before
        gw.drain_system_events(MAIN)
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        human(gw, GROUP)
        assert [w.target for w in wakes] == [GROUP]  # explicit now: it wakes
        human(gw, GROUP)  # an ambient registration never downgrades it
        assert cursor(gw, MAIN, GROUP)["provenance"] == "explicit"  # type: ignore[index]

    def test_non_human_group_turns_register_nothing(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        gw.inbound(GROUP, "x", channel="telegram", provenance="internal_system")
        gw.inbound(GROUP, "x", channel="telegram", provenance="inter_session", source_session_key=PEER)
        assert gw.cursors(target=GROUP) == []
        assert gw.state_version(GROUP) == 0

    def test_a_group_routed_into_main_registers_nothing(self, gw: Gateway) -> None:
        gw.put_session(MAIN, kind="group")
        out = human(gw, MAIN)
        assert out["recorded"] is False
        assert gw.cursors() == []

    def test_ambient_registration_does_not_touch_an_existing_row(
        self, peer_family: Gateway, clock: ManualClock
    ) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        gw.inbound(GROUP, "x", channel="telegram")
        gw.drain_system_events(MAIN)
        stamped = cursor(gw, MAIN, GROUP)
        clock.advance(100)
        gw.inbound(GROUP, "y", channel="telegram", provenance="internal_system")  # not human: no registration
        assert cursor(gw, MAIN, GROUP) == stamped

    # -- reset and delete ------------------------------------------------------------------------------------
    def test_reset_drops_the_sessions_own_watches_but_keeps_others_on_it(self, peer_family: Gateway) -> None:
        gw = peer_family
        send(gw, CHILD, PEER, watch=True)  # CHILD watches PEER
        gw.set_goal(PEER, "create", objective="o")
        human(gw, CHILD)
        assert texts(gw, CHILD) == [notice(PEER, 0)]
        old_id = gw.get_session(CHILD)["sessionId"]
        head = gw.state_version(CHILD)
        events = log(gw, CHILD)
        out = gw.reset_session(CHILD)
        assert out["sessionId"] != old_id
        assert gw.cursors(watcher=CHILD) == []
        assert texts(gw, CHILD) == []
        assert cursor(gw, MAIN, CHILD) is not None  # others' cursors on it are kept
        assert gw.state_version(CHILD) == head and log(gw, CHILD) == events
        gw.set_goal(PEER, "edit", objective="p")
        assert texts(gw, CHILD) == []  # no notices for its old watch

    def test_delete_removes_events_head_and_cursors_both_ways(self, peer_family: Gateway) -> None:
        gw = peer_family
        send(gw, CHILD, PEER, watch=True)
        gw.set_goal(PEER, "create", objective="o")
        human(gw, CHILD)
        assert texts(gw, MAIN) and texts(gw, CHILD)
        assert gw.delete_session(CHILD) == {"deleted": True}
        assert gw.state_version(CHILD) == 0
        assert log(gw, CHILD) == []
        assert gw.cursors(watcher=CHILD) == [] and gw.cursors(target=CHILD) == []
        assert texts(gw, CHILD) == []  # its own queue is gone too
        assert texts(gw, MAIN) == []  # its pending notice about the deleted session is gone
        err(gw.call_tool("session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN), "not_found")
        assert log(gw, PEER) != []  # others untouched
        assert gw.delete_session(CHILD) == {"deleted": False}
        # a new session under the same key starts from nothing
        gw.put_session(CHILD)
        assert gw.state_version(CHILD) == 0

    # -- the global-scope rule -------------------------------------------------------------------------------
    def test_bare_global_gets_the_log_but_no_cursor_or_notice(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session("global", agent_id="a", spawned_by=MAIN)
        seq = gw.set_goal("global", "create", objective="o", agent_id="a")["event"]["sequence"]
        human(gw, "global", agent_id="a")
        assert gw.state_version("global", agent_id="a") > seq
        changes = status(gw, MAIN, "global", since=0)["stateChanges"]["events"]
        assert [e["kind"] for e in changes] == ["goal_changed", "human_direct_message"]
        assert gw.cursors() == []
        assert texts(gw, MAIN) == []
        assert send(gw, MAIN, "global", watch=True)["watched"] is False
        out = ok(
            gw.call_tool(
                "sessions_send", {"sessionKey": MAIN, "message": "x", "watch": True}, caller="global", agent_id="a"
            )
        )
        assert out["watched"] is False
        assert gw.cursors() == []
        assert (
            ok(gw.call_tool("session_unwatch", {"sessionKey": MAIN}, caller="global", agent_id="a"))["unwatched"]
            is False
        )

    def test_two_agents_global_sessions_are_independent(self, gw: Gateway) -> None:
        gw.put_session("global", agent_id="a")
        gw.put_session("global", agent_id="b")
        a1 = gw.record_compaction("global", "x", agent_id="a")["event"]["sequence"]
        b1 = gw.set_goal("global", "create", objective="o", agent_id="b")["event"]["sequence"]
        assert gw.state_version("global", agent_id="a") == a1
        assert gw.state_version("global", agent_id="b") == b1
        sa = ok(gw.call_tool("session_status", {"changesSince": 0}, caller="global", agent_id="a"))
        sb = ok(gw.call_tool("session_status", {"changesSince": 0}, caller="global", agent_id="b"))
        assert [e["kind"] for e in sa["stateChanges"]["events"]] == ["compacted"]
        assert [e["kind"] for e in sb["stateChanges"]["events"]] == ["goal_changed"]
        assert "goal" not in sa and sb["goal"]["objective"] == "o"
        gw.delete_session("global", agent_id="a")
        assert gw.state_version("global", agent_id="a") == 0
        assert gw.state_version("global", agent_id="b") == b1
        assert [e["agentId"] for e in log(gw)] == ["b"]

    # -- session_unwatch -------------------------------------------------------------------------------------
    def test_unwatch_drops_cursor_and_pending_notice_and_mutes_the_spawn_parent(self, peer_family: Gateway) -> None:
        gw = peer_family
        human(gw, CHILD)
        gw.enqueue_system_event(MAIN, "unrelated", context_key="cron:x")
        assert len(texts(gw, MAIN)) == 2
        out = ok(gw.call_tool("session_unwatch", {"sessionKey": CHILD}, caller=MAIN))
        assert out["unwatched"] is True and "text" in out
        assert cursor(gw, MAIN, CHILD) is None
        assert texts(gw, MAIN) == ["unrelated"]
        head = gw.state_version(CHILD)
        seq = human(gw, CHILD)["event"]["sequence"]  # still logged
        gw.set_goal(CHILD, "create", objective="o")
        assert seq > head and gw.state_version(CHILD) > seq
        assert cursor(gw, MAIN, CHILD) is None
        assert texts(gw, MAIN) == ["unrelated"]
        again = ok(gw.call_tool("session_unwatch", {"sessionKey": CHILD}, caller=MAIN))
        assert again["unwatched"] is False

    def test_an_explicit_watch_unmutes(self, peer_family: Gateway) -> None:
        gw = peer_family
        ok(gw.call_tool("session_unwatch", {"sessionKey": CHILD}, caller=MAIN))
        human(gw, CHILD)
        head = gw.state_version(CHILD)
        assert send(gw, MAIN, CHILD, watch=True)["watched"] is True
        assert marks(gw, MAIN, CHILD) == (head, head, head)
        human(gw, CHILD)
        assert texts(gw, MAIN) == [notice(CHILD, head)]

    def test_a_new_spawn_run_unmutes_and_the_same_run_does_not(self, peer_family: Gateway) -> None:
        gw = peer_family
        ok(gw.call_tool("session_unwatch", {"sessionKey": CHILD}, caller=MAIN))
        spawn(gw, MAIN, "kid", run_id="run-1")  # same run: no-op, still muted
        human(gw, CHILD)
        assert cursor(gw, MAIN, CHILD) is None and texts(gw, MAIN) == []
        seq = spawn(gw, MAIN, "kid", run_id="run-2")["stateVersion"]
        assert marks(gw, MAIN, CHILD) == (seq, seq, seq)
        human(gw, CHILD)
        assert texts(gw, MAIN) == [notice(CHILD, seq)]

    def test_unwatching_a_group_keeps_ambient_off(self, peer_family: Gateway) -> None:
        gw = peer_family
        gw.put_session(GROUP)
        human(gw, GROUP)
        ok(gw.call_tool("session_unwatch", {"sessionKey": GROUP}, caller=MAIN))
        assert texts(gw, MAIN) == []
        out = human(gw, GROUP)
        assert out["recorded"] is False  # nothing watches it any more
        assert cursor(gw, MAIN, GROUP) is None and texts(gw, MAIN) == []

    def test_unwatching_an_unknown_session_is_not_found(self, peer_family: Gateway) -> None:
        out = peer_family.call_tool("session_unwatch", {"sessionKey": "agent:a:ghost"}, caller=MAIN)
        err(out, "not_found")
