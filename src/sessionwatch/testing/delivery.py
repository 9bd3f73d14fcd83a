"""At-least-once delivery (peek with stable ids, acknowledge by id) and reconciling reads that
acknowledge what they returned (docs/http.md, "Delivery and reconciling")."""

from __future__ import annotations

import pytest

from sessionwatch import Gateway, SessionwatchError, Settings
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, ctx, human, marks, notice, snapshot, spawn, status, texts
from .suite import SuiteBase

GROUP = "agent:a:telegram:group:g"


def ids(gw: Gateway, key: str) -> list[int]:
    return [e["id"] for e in gw.peek_system_events(key)]


class DeliveryTests(SuiteBase):
    """At-least-once delivery (peek with stable ids, acknowledge by id) and reconciling reads."""

    # -- stable ids ------------------------------------------------------------------------------------
    def test_ids_stay_put_when_the_queue_is_renumbered(self, family: Gateway) -> None:
        gw = family
        for i in range(3):
            gw.enqueue_system_event(MAIN, f"tick {i}")
        human(gw, CHILD)  # a notice in the middle ...
        gw.enqueue_system_event(MAIN, "tick 3")
        before = {e["text"]: e["id"] for e in gw.peek_system_events(MAIN)}
        assert len(set(before.values())) == 5
        gw.call_tool("session_unwatch", {"sessionKey": CHILD}, caller=MAIN)  # ... taken out: the rest renumbers
        after = {e["text"]: e["id"] for e in gw.peek_system_events(MAIN)}
        assert after == {t: i for t, i in before.items() if not t.startswith("Session ")}
        gw.enqueue_system_event(MAIN, "tick 4")
        newest = gw.peek_system_events(MAIN)[-1]
        assert newest["text"] == "tick 4" and newest["id"] not in before.values()

    def test_ids_are_the_same_in_another_process(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        human(gw, CHILD)
        gw.enqueue_system_event(MAIN, "tick")
        other = self.open_gateway(clock=clock, timers=False)
        try:
            assert other.peek_system_events(MAIN) == gw.peek_system_events(MAIN)
            assert other.ack_system_events(MAIN, ids(gw, MAIN)[:1]) == {"acknowledged": 1}
        finally:
            other.close()
        assert texts(gw, MAIN) == ["tick"]

    def test_ids_are_never_reused_for_another_entry(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        seen: set[int] = set()
        for round_ in range(3):
            for i in range(25):  # past the cap: evictions too
                gw.enqueue_system_event(MAIN, f"r{round_} e{i}")
            now = ids(gw, MAIN)
            assert not seen & set(now)
            seen |= set(now)
            if round_ == 0:
                gw.drain_system_events(MAIN)
            else:
                gw.delete_session(MAIN)  # and the key comes back
                gw.put_session(MAIN)

    # -- acknowledge by id -----------------------------------------------------------------------------
    def test_ack_removes_exactly_the_given_entries(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        for i in range(4):
            gw.enqueue_system_event(MAIN, f"tick {i}")
        first, second, third, fourth = ids(gw, MAIN)
        assert gw.ack_system_events(MAIN, [second, fourth]) == {"acknowledged": 2}
        assert texts(gw, MAIN) == ["tick 0", "tick 2"]
        assert ids(gw, MAIN) == [first, third]
        assert gw.ack_system_events(MAIN, [second, fourth, 10**9]) == {"acknowledged": 0}  # gone or unknown
        assert gw.ack_system_events(MAIN, []) == {"acknowledged": 0}
        assert texts(gw, MAIN) == ["tick 0", "tick 2"]

    @pytest.mark.parametrize("mode", ["drain", "peek + ack"])
    def test_peek_then_ack_is_a_drain(self, gw: Gateway, mode: str) -> None:
        """Peek + ack of every id consumes and acknowledges exactly what a drain does."""
        gw.put_session(MAIN)
        spawned = spawn(gw, MAIN, "kid")["stateVersion"]
        first = human(gw, CHILD)["event"]["sequence"]
        last = human(gw, CHILD)["event"]["sequence"]  # material moves on after the notice froze
        gw.enqueue_system_event(MAIN, "tick")
        seen = gw.peek_system_events(MAIN)
        if mode == "drain":
            got = gw.drain_system_events(MAIN)
        else:
            assert gw.ack_system_events(MAIN, [e["id"] for e in seen]) == {"acknowledged": 2}
            got = seen
        assert [e["text"] for e in got] == [notice(CHILD, spawned), "tick"]
        assert marks(gw, MAIN, CHILD) == (first, last, last)
        assert texts(gw, MAIN) == [notice(CHILD, first)]  # exactly one reopen, quoting the frozen watermark

    def test_ack_of_a_notice_that_was_replaced_keeps_the_new_one(self, family: Gateway) -> None:
        gw = family
        human(gw, CHILD)
        old = gw.peek_system_events(MAIN)
        human(gw, CHILD)
        gw.drain_system_events(MAIN)  # another face consumed it; material had moved on: a reopen with a new id
        reopened = gw.peek_system_events(MAIN)
        assert len(reopened) == 1 and reopened[0]["id"] != old[0]["id"]
        before = marks(gw, MAIN, CHILD)
        assert gw.ack_system_events(MAIN, [old[0]["id"]]) == {"acknowledged": 0}
        assert gw.peek_system_events(MAIN) == reopened and marks(gw, MAIN, CHILD) == before

    def test_a_notice_peeked_before_more_changes_is_acknowledged_at_its_watermark(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        [entry] = gw.peek_system_events(MAIN)
        assert entry["text"] == notice(CHILD, spawned)
        later = human(gw, CHILD)["event"]["sequence"]  # arrives while the client holds the peeked notice
        assert gw.ack_system_events(MAIN, [entry["id"]]) == {"acknowledged": 1}
        assert marks(gw, MAIN, CHILD) == (first, later, later)
        assert texts(gw, MAIN) == [notice(CHILD, first)]  # the later change is still announced

    @pytest.mark.parametrize(
        "bad", ["1", [True], [1.0], ["1"], [0], [-3], [2**63], None, {"ids": [1]}, list(range(1, 1002))]
    )
    def test_bad_ids_are_refused_and_change_nothing(self, family: Gateway, bad: object) -> None:
        gw = family
        human(gw, CHILD)
        keys = [MAIN, CHILD]
        before = snapshot(gw, keys)
        with pytest.raises(SessionwatchError) as info:
            gw.ack_system_events(MAIN, bad)
        assert info.value.code == "invalid_argument"
        assert snapshot(gw, keys) == before

    # -- reconciling acknowledges what it returned -----------------------------------------------------
    def test_reading_the_changes_withdraws_the_follow_up_notice(self, family: Gateway) -> None:
        """The issue's case: notice "changesSince 18", events 19 and 20 read, no "changesSince 19" after."""
        gw = family
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        last = human(gw, CHILD)["event"]["sequence"]
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == [notice(CHILD, spawned)]
        assert len(texts(gw, MAIN)) == 1  # v1's reopen: the second change after the frozen watermark
        out = status(gw, MAIN, CHILD, since=spawned)
        assert [e["sequence"] for e in out["stateChanges"]["events"]][-1] == last
        assert texts(gw, MAIN) == []
        assert marks(gw, MAIN, CHILD) == (last, last, last)

    def test_a_read_covering_a_queued_notice_withdraws_it(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        gw.enqueue_system_event(MAIN, "tick")
        human(gw, CHILD)
        status(gw, MAIN, CHILD, since=0)  # from further back: still covers everything after lastSeen
        assert texts(gw, MAIN) == ["tick"]
        head = gw.state_version(CHILD)
        assert marks(gw, MAIN, CHILD) == (head, head, head) and head > spawned

    def test_a_truncated_page_leaves_one_notice_quoting_the_new_last_seen(self, clock: ManualClock) -> None:
        gw = self.open_gateway(clock=clock, settings=Settings(changes_page_size=2), timers=False)
        try:
            gw.put_session(MAIN)
            spawned = spawn(gw, MAIN, "kid")["stateVersion"]
            seqs = [human(gw, CHILD)["event"]["sequence"] for _ in range(3)]
            page = status(gw, MAIN, CHILD, since=spawned)["stateChanges"]
            assert page["truncated"] is True and [e["sequence"] for e in page["events"]] == seqs[:2]
            assert texts(gw, MAIN) == [notice(CHILD, seqs[1])]
            assert marks(gw, MAIN, CHILD) == (seqs[1], seqs[2], seqs[2])
            status(gw, MAIN, CHILD, since=seqs[1])  # the next page finishes it
            assert texts(gw, MAIN) == [] and marks(gw, MAIN, CHILD) == (seqs[2],) * 3
        finally:
            gw.close()

    def test_changes_after_the_page_leave_exactly_one_notice(self, family: Gateway) -> None:
        """A change that lands between the read and its acknowledgment is announced once more."""
        gw = family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        late = human(gw, CHILD)["event"]["sequence"]
        gw.reconcile(MAIN, CHILD, spawned, first)  # the read returned up to `first`; `late` came after it
        assert texts(gw, MAIN) == [notice(CHILD, first)]
        assert marks(gw, MAIN, CHILD) == (first, late, late)
        [entry] = gw.peek_system_events(MAIN)
        assert entry["contextKey"] == ctx(CHILD)

    def test_a_read_that_skips_events_acknowledges_nothing(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        human(gw, CHILD)
        before = (marks(gw, MAIN, CHILD), texts(gw, MAIN))
        status(gw, MAIN, CHILD, since=first)  # starts after lastSeen (= spawned): the gap was never read
        assert (marks(gw, MAIN, CHILD), texts(gw, MAIN)) == before
        assert before[1] == [notice(CHILD, spawned)]

    def test_a_group_read_by_main_withdraws_its_quiet_notice(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session(GROUP)
        human(gw, GROUP)
        assert texts(gw, MAIN) == [notice(GROUP, 0)]
        status(gw, MAIN, GROUP, since=0)
        assert texts(gw, MAIN) == []
        head = gw.state_version(GROUP)
        assert marks(gw, MAIN, GROUP) == (head, head, head)
