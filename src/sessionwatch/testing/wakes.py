"""Wakes: immediate first wake, 20 s coalescing into one trailing wake, and who is never woken."""

from __future__ import annotations

from sessionwatch import Gateway, Wake
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, SECOND, human, notice, send, spawn, texts
from .suite import SuiteBase

REASON = f"session-state:{CHILD}"


class WakeTests(SuiteBase):
    """Wakes: immediate first wake, 20 s coalescing into one trailing wake, and who is never woken."""

    def test_first_wake_is_delivered_at_once_after_the_commit(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        seen: list[tuple[Wake, list[str]]] = []
        spawned = gw.state_version(CHILD)
        gw.subscribe_wakes(MAIN, lambda w: seen.append((w, texts(gw, MAIN))))
        human(gw, CHILD)
        assert len(seen) == 1
        wake, queue_at_wake = seen[0]
        assert wake == Wake(MAIN, CHILD, REASON, clock(), trailing=False)
        assert wake.to_json() == {"watcher": MAIN, "target": CHILD, "reason": REASON, "at": clock(), "trailing": False}
        assert queue_at_wake == [notice(CHILD, spawned)]  # the notice was committed before the wake

    def test_requests_within_20s_collapse_into_one_trailing_wake(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        t0 = clock()
        human(gw, CHILD)
        assert len(wakes) == 1
        clock.advance(5 * SECOND)
        human(gw, CHILD)
        clock.advance(5 * SECOND)
        gw.set_goal(CHILD, "create", objective="o")
        assert len(wakes) == 1
        gw.run_due(t0 + 20 * SECOND - 1)
        assert len(wakes) == 1
        clock.now = t0 + 20 * SECOND
        gw.run_due()
        assert len(wakes) == 2
        assert wakes[1] == Wake(MAIN, CHILD, REASON, t0 + 20 * SECOND, trailing=True)
        gw.run_due(t0 + 60 * SECOND)
        assert len(wakes) == 2  # one trailing wake per window, not one per request
        # the trailing wake opened a new window
        clock.now = t0 + 30 * SECOND
        human(gw, CHILD)
        assert len(wakes) == 2
        clock.now = t0 + 40 * SECOND
        gw.run_due()
        assert len(wakes) == 3 and wakes[2].trailing and wakes[2].at == t0 + 40 * SECOND

    def test_no_trailing_wake_when_nothing_is_pending_any_more(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        t0 = clock()
        human(gw, CHILD)
        gw.drain_system_events(MAIN)
        clock.advance(5 * SECOND)
        human(gw, CHILD)
        clock.advance(5 * SECOND)
        gw.drain_system_events(MAIN)  # consumed before the window ends
        assert texts(gw, MAIN) == []
        gw.run_due(t0 + 25 * SECOND)
        assert len(wakes) == 1
        clock.now = t0 + 50 * SECOND  # long after the window: the next request wakes at once
        human(gw, CHILD)
        assert len(wakes) == 2 and not wakes[1].trailing and wakes[1].at == t0 + 50 * SECOND

    def test_a_reopened_notice_wakes(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        human(gw, CHILD)
        human(gw, CHILD)
        clock.advance(21 * SECOND)
        gw.drain_system_events(MAIN)
        assert len(texts(gw, MAIN)) == 1
        assert len(wakes) == 2 and wakes[1].at == clock()

    def test_subagent_watchers_are_never_woken(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        spawn(gw, CHILD, "grand", run_id="g-1")
        grand = "agent:a:subagent:grand"
        wakes: list[Wake] = []
        gw.subscribe_wakes(CHILD, wakes.append)
        human(gw, grand)
        clock.advance(5 * SECOND)
        human(gw, grand)
        gw.run_due(clock() + 60 * SECOND)
        assert len(texts(gw, CHILD)) == 1  # it still gets the notice on its next turn
        assert wakes == []

    def test_queue_only_notices_never_wake(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        group = "agent:a:telegram:group:g1"
        gw.put_session(group)
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        human(gw, group)
        clock.advance(30 * SECOND)
        human(gw, group)
        gw.acknowledge(MAIN, [group])  # a reopen of an ambient notice is queue-only too
        gw.run_due(clock() + 60 * SECOND)
        assert texts(gw, MAIN) and wakes == []

    def test_unsubscribe_stops_delivery(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        wakes: list[Wake] = []
        sub = gw.subscribe_wakes(MAIN, wakes.append)
        human(gw, CHILD)
        clock.advance(5 * SECOND)
        human(gw, CHILD)  # schedules a trailing wake
        sub.close()
        assert sub.closed
        gw.run_due(clock() + 60 * SECOND)
        clock.advance(60 * SECOND)
        gw.drain_system_events(MAIN)
        human(gw, CHILD)
        assert len(wakes) == 1
        sub.close()  # idempotent

    def test_every_subscriber_of_the_watcher_gets_it_and_others_do_not(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:a:peer")
        a: list[Wake] = []
        b: list[Wake] = []
        other: list[Wake] = []
        gw.subscribe_wakes(MAIN, a.append)
        with gw.subscribe_wakes(MAIN, b.append):
            gw.subscribe_wakes("agent:a:peer", other.append)
            human(gw, CHILD)
        assert len(a) == len(b) == 1 and other == []

    def test_a_failing_subscriber_does_not_fail_the_action(self, family: Gateway) -> None:
        gw = family
        good: list[Wake] = []

        def boom(_: Wake) -> None:
            raise RuntimeError("subscriber bug")

        gw.subscribe_wakes(MAIN, boom)
        gw.subscribe_wakes(MAIN, good.append)
        out = human(gw, CHILD)
        assert out["recorded"] is True and len(good) == 1

    def test_explicit_watchers_wake_too(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:a:peer")
        send(gw, "agent:a:peer", CHILD, watch=True)
        wakes: list[Wake] = []
        gw.subscribe_wakes("agent:a:peer", wakes.append)
        gw.set_goal(CHILD, "create", objective="o")
        assert [(w.watcher, w.target, w.reason) for w in wakes] == [("agent:a:peer", CHILD, REASON)]

    def test_a_promoted_ambient_notice_counts_as_pending_for_the_trailing_wake(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        group = "agent:a:telegram:group:g1"
        gw.put_session(group)
        human(gw, group)  # queued quietly for main
        send(gw, MAIN, group, watch=True)  # now an explicit watch; the queued notice is still pending
        wakes: list[Wake] = []
        gw.subscribe_wakes(MAIN, wakes.append)
        human(gw, group)
        assert len(wakes) == 1
        clock.advance(5 * SECOND)
        human(gw, group)
        gw.run_due(clock() + 20 * SECOND)
        assert len(texts(gw, MAIN)) == 1
        assert [w.trailing for w in wakes] == [False, True]

    def test_the_same_run_id_after_the_run_ended_stays_a_no_op(self, family: Gateway) -> None:
        gw = family
        gw.end_run(CHILD, "run-1", "ok")
        before = (gw.events_after(0), gw.cursors())
        history = gw.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN)["messages"]
        spawn(gw, MAIN, "kid", run_id="run-1", task="again")
        assert (gw.events_after(0), gw.cursors()) == before
        assert "activeRunId" not in gw.get_session(CHILD)
        assert gw.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN)["messages"] == history
