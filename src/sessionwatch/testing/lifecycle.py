"""Lifecycle state: reports, the typed events, who is told (ends, losses and returns only), the lost timer
(silence, a live process on this machine), the listing filter, deletion, and a state machine against a
small reference model of the rules (docs/lifecycle.md)."""

from __future__ import annotations

import os
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sessionwatch import Gateway, InvalidArgument, NotFound, Settings
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, MINUTE, SECOND, ctx, err, log, notice, ok, send, spawn, status, texts
from .suite import SuiteBase

PEER = "agent:a:peer"
LOST_AFTER = 10 * MINUTE  # the default
ELSEWHERE = "another-machine"  # a pid there cannot be checked here: silence alone decides


def kinds_of(gw: Gateway, key: str) -> list[str]:
    return [e["kind"] for e in log(gw, key) if e["kind"].startswith("session_")]


def state_of(gw: Gateway, key: str, caller: str = MAIN) -> dict[str, Any] | None:
    out = status(gw, caller, key)
    got: dict[str, Any] | None = out.get("lifecycle")
    return got


class LifecycleTests(SuiteBase):
    """Lifecycle state through the public API, on every store."""

    # -- reports and their events ----------------------------------------------------------------------------
    def test_a_session_never_reported_has_no_lifecycle_and_v1_shapes(self, family: Gateway) -> None:
        out = status(family, MAIN, CHILD)
        assert "lifecycle" not in out and "lifecycle:" not in out["text"]
        listed = ok(family.call_tool("sessions_list", {}, caller=MAIN))["sessions"]
        assert all("lifecycle" not in s for s in listed)
        assert "lifecycle" not in family.get_session(CHILD)

    def test_the_status_read_carries_the_lifecycle_as_the_state_row_shows_it(self, family: Gateway) -> None:
        """session_status reads the session, its stateVersion and its lifecycle in one store read
        (``get_session_status``): the same answer as the lifecycle's own row."""
        gw = family
        row, version, state = gw.store.get_session_status(CHILD, "a")
        assert state is None and row.session_key == CHILD and version == gw.state_version(CHILD)
        gw.report_lifecycle(CHILD, "ended", outcome="failed")
        found = gw.store.get_session_status(CHILD, "a")
        assert found is not None and found[2] == gw.store.get_lifecycle(CHILD, "a").to_json()
        assert found[2]["outcome"] == "failed" and found[1] == gw.state_version(CHILD)
        assert gw.store.get_session_status("agent:a:nobody", "a") is None

    def test_each_change_is_one_typed_content_free_event(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        first = gw.report_lifecycle(CHILD, "working", host="claude")
        assert first["changed"] is True and first["lifecycle"] == {"state": "working", "since": clock()}
        assert [e["kind"] for e in first["events"]] == ["session_working"]
        clock.advance(SECOND)
        gw.report_lifecycle(CHILD, "waiting")
        clock.advance(SECOND)
        gw.report_lifecycle(CHILD, "idle")
        assert kinds_of(gw, CHILD) == ["session_working", "session_waiting", "session_idle"]
        events = [e for e in log(gw, CHILD) if e["kind"].startswith("session_")]
        assert [e["summary"] for e in events] == ["session working", "session waiting on a person", "session idle"]
        assert all(e["actorType"] == "system" and "payload" not in e for e in events)
        assert state_of(gw, CHILD) == {"state": "idle", "since": clock()}
        assert "lifecycle: idle since " in status(gw, MAIN, CHILD)["text"]

    def test_repeating_the_state_a_session_is_in_changes_nothing(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working")
        since = clock()
        head = gw.state_version(CHILD)
        clock.advance(5 * SECOND)
        again = gw.report_lifecycle(CHILD, "working", pid=4242, host="codex")
        assert again["changed"] is False and again["events"] == []
        assert gw.state_version(CHILD) == head
        assert state_of(gw, CHILD) == {"state": "working", "since": since}

    def test_a_report_older_than_the_state_it_would_replace_is_ignored(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        clock.advance(MINUTE)
        gw.report_lifecycle(CHILD, "working")
        late = gw.report_lifecycle(CHILD, "idle", at=clock() - 30 * SECOND)  # sent before the turn began
        assert late["stale"] is True and late["changed"] is False and late["events"] == []
        assert state_of(gw, CHILD) == {"state": "working", "since": clock()}

    def test_at_sets_since_and_is_clamped_like_occurred_at(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working", at=clock() - 2 * SECOND)
        assert state_of(gw, CHILD) == {"state": "working", "since": clock() - 2 * SECOND}
        gw.report_lifecycle(CHILD, "idle", at=clock() + 10 * MINUTE)  # the future is now
        assert state_of(gw, CHILD) == {"state": "idle", "since": clock()}

    # -- who is told -------------------------------------------------------------------------------------------
    def test_turns_never_make_the_parent_or_a_watcher_stale(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.put_session(PEER)
        send(gw, PEER, CHILD, watch=True)
        for state in ("working", "waiting", "working", "idle", "working", "idle"):
            clock.advance(SECOND)
            gw.report_lifecycle(CHILD, state)
        assert texts(gw, MAIN) == [] and texts(gw, PEER) == []
        assert all(c["material"] == c["lastSeen"] for c in gw.cursors(target=CHILD))

    def test_an_end_tells_the_parent_and_watchers_once_in_v1_words(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.put_session(PEER)
        send(gw, PEER, CHILD, watch=True)
        seen = gw.state_version(CHILD)
        gw.report_lifecycle(CHILD, "working")
        clock.advance(SECOND)
        ended = gw.report_lifecycle(CHILD, "ended", outcome="ok")
        assert [e["kind"] for e in ended["events"]] == ["session_ended"]
        assert texts(gw, MAIN) == [notice(CHILD, seen)]
        assert texts(gw, PEER) == [notice(CHILD, seen)]
        gw.report_lifecycle(CHILD, "ended", outcome="ok")  # the host says it twice: nothing more
        assert texts(gw, MAIN) == [notice(CHILD, seen)]
        page = status(gw, MAIN, CHILD, since=seen)["stateChanges"]["events"]
        assert [e["kind"] for e in page] == ["session_working", "session_ended"]
        assert page[-1]["payload"] == {"outcome": "ok"}
        assert texts(gw, MAIN) == []  # the read covered it: withdrawn

    def test_a_failed_child_tells_its_parent_with_the_outcome_in_the_changes(self, family: Gateway) -> None:
        gw = family
        seen = gw.state_version(CHILD)
        gw.report_lifecycle(CHILD, "working")
        gw.report_lifecycle(CHILD, "ended", outcome="failed")
        assert texts(gw, MAIN) == [notice(CHILD, seen)]
        last = status(gw, MAIN, CHILD, since=seen)["stateChanges"]["events"][-1]
        assert (last["kind"], last["summary"], last["payload"]) == (
            "session_ended",
            "session ended (failed)",
            {"outcome": "failed"},
        )
        assert state_of(gw, CHILD) == {"state": "ended", "since": last["occurredAt"], "outcome": "failed"}

    def test_the_ending_session_itself_is_not_told(self, family: Gateway) -> None:
        gw = family
        gw.report_lifecycle(MAIN, "ended")
        assert texts(gw, MAIN) == []

    # -- lost --------------------------------------------------------------------------------------------------
    def test_silence_while_working_is_lost_once_and_the_parent_is_told_once(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        seen = gw.state_version(CHILD)
        gw.report_lifecycle(CHILD, "working")
        clock.advance(LOST_AFTER - SECOND)
        assert gw.check_lost() == [] and state_of(gw, CHILD)["state"] == "working"  # type: ignore[index]
        clock.advance(SECOND)
        lost = gw.check_lost()
        assert [(e["sessionKey"], e["kind"], e["summary"]) for e in lost] == [(CHILD, "session_lost", "session lost")]
        assert state_of(gw, CHILD) == {"state": "lost", "since": clock()}
        clock.advance(LOST_AFTER)
        assert gw.check_lost() == []  # lost once
        assert texts(gw, MAIN) == [notice(CHILD, seen)]

    def test_the_engine_timer_finds_lost_sessions_on_its_own(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "waiting")
        clock.advance(LOST_AFTER + MINUTE)
        gw.run_due(clock())
        assert kinds_of(gw, CHILD) == ["session_waiting", "session_lost"]

    @pytest.mark.parametrize("state", ["idle", "ended"])
    def test_idle_and_ended_sessions_are_never_lost(self, family: Gateway, clock: ManualClock, state: str) -> None:
        gw = family
        gw.report_lifecycle(CHILD, state)
        clock.advance(10 * LOST_AFTER)
        assert gw.check_lost() == [] and state_of(gw, CHILD)["state"] == state  # type: ignore[index]

    def test_a_heartbeat_of_the_same_state_keeps_a_session_from_being_lost(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        for _ in range(5):
            gw.report_lifecycle(CHILD, "working")
            clock.advance(LOST_AFTER - MINUTE)
            assert gw.check_lost() == []
        assert kinds_of(gw, CHILD) == ["session_working"]

    def test_a_live_process_on_this_machine_is_quiet_not_lost(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working", pid=os.getpid())  # this very process: alive
        clock.advance(3 * LOST_AFTER)
        assert gw.check_lost() == [] and state_of(gw, CHILD)["state"] == "working"  # type: ignore[index]

    def test_a_pid_on_another_machine_cannot_be_checked_so_silence_decides(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working", pid=os.getpid(), machine=ELSEWHERE)
        clock.advance(LOST_AFTER)
        assert [e["kind"] for e in gw.check_lost()] == ["session_lost"]

    def test_the_limit_is_configurable(self, clock: ManualClock) -> None:
        gw = self.open_gateway(clock=clock, settings=Settings(lost_after_ms=2 * SECOND))
        try:
            gw.put_session(MAIN)
            spawn(gw, MAIN, "kid")
            gw.report_lifecycle(CHILD, "working")
            clock.advance(2 * SECOND)
            assert [e["kind"] for e in gw.check_lost()] == ["session_lost"]
        finally:
            gw.close()

    def test_a_lost_session_that_reports_again_is_back_and_the_parent_told(
        self, family: Gateway, clock: ManualClock
    ) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working")
        clock.advance(LOST_AFTER)
        gw.check_lost()
        gw.drain_system_events(MAIN)  # the parent saw the loss
        seen = gw.cursors(watcher=MAIN, target=CHILD)[0]["lastSeen"]
        clock.advance(SECOND)
        back = gw.report_lifecycle(CHILD, "working")
        assert [e["kind"] for e in back["events"]] == ["session_back", "session_working"]
        assert back["events"][0]["summary"] == "session back"
        assert state_of(gw, CHILD) == {"state": "working", "since": clock()}
        assert texts(gw, MAIN) == [notice(CHILD, seen)]
        assert kinds_of(gw, CHILD) == ["session_working", "session_lost", "session_back", "session_working"]

    def test_a_lost_session_that_reports_its_end_is_back_then_ended(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "waiting")
        clock.advance(LOST_AFTER)
        gw.check_lost()
        out = gw.report_lifecycle(CHILD, "ended", outcome="cancelled")
        assert [e["kind"] for e in out["events"]] == ["session_back", "session_ended"]
        assert len(texts(gw, MAIN)) == 1  # one coalesced notice for the loss, the return and the end

    def test_two_processes_racing_record_each_change_and_each_loss_once(self, clock: ManualClock) -> None:
        # Two gateways on one store (two processes' worth of connections), each on its own thread.
        import threading

        first = self.open_gateway(clock=clock)
        second = self.open_gateway(clock=clock)
        try:
            first.put_session(MAIN)
            kids = [spawn(first, MAIN, f"r{i}")["sessionKey"] for i in range(8)]
            barrier = threading.Barrier(2)

            def race(gw: Gateway, job: Any) -> None:
                barrier.wait()
                for k in kids:
                    job(gw, k)

            def run(job: Any) -> None:
                threads = [threading.Thread(target=race, args=(g, job)) for g in (first, second)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(60)

            run(lambda gw, k: gw.report_lifecycle(k, "working"))
            clock.advance(LOST_AFTER)
            run(lambda gw, k: gw.check_lost())
            run(lambda gw, k: gw.report_lifecycle(k, "ended"))
            for k in kids:
                assert kinds_of(first, k) == ["session_working", "session_lost", "session_back", "session_ended"], k
        finally:
            first.close()
            second.close()

    # -- bad input, unknown sessions ---------------------------------------------------------------------------
    def test_a_report_for_an_unknown_session_is_not_found_and_creates_nothing(self, gw: Gateway) -> None:
        with pytest.raises(NotFound):
            gw.report_lifecycle("agent:a:nobody", "working")
        assert gw.list_sessions() == [] and log(gw) == []

    @pytest.mark.parametrize(
        "bad",
        [
            {"state": "lost"},
            {"state": "busy"},
            {"state": None},
            {"state": 1},
            {"state": "working", "outcome": "ok"},
            {"state": "ended", "outcome": "exploded"},
            {"state": "working", "pid": 0},
            {"state": "working", "pid": True},
            {"state": "working", "pid": "123"},
            {"state": "working", "pid": 2**31},
            {"state": "working", "host": ""},
            {"state": "working", "host": "h" * 201},
            {"state": "working", "machine": 5},
            {"state": "working", "at": "yesterday"},
            {"state": "working", "at": True},
        ],
    )
    def test_bad_reports_are_refused_and_change_nothing(self, family: Gateway, bad: dict[str, Any]) -> None:
        gw = family
        before = log(gw)
        args = dict(bad)
        state = args.pop("state")
        with pytest.raises(InvalidArgument):
            gw.report_lifecycle(CHILD, state, **args)
        assert log(gw) == before and state_of(gw, CHILD) is None

    # -- reading it --------------------------------------------------------------------------------------------
    def test_sessions_list_shows_and_filters_by_state(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        gw.put_session(PEER)
        gw.report_lifecycle(CHILD, "waiting")
        gw.report_lifecycle(PEER, "working")

        def listed(**args: Any) -> dict[str, Any]:
            out = ok(gw.call_tool("sessions_list", args, caller=MAIN))
            return {s["sessionKey"]: s.get("lifecycle") for s in out["sessions"]}

        assert listed() == {
            PEER: {"state": "working", "since": clock()},
            CHILD: {"state": "waiting", "since": clock()},
            MAIN: None,
        }
        assert listed(lifecycle="waiting") == {CHILD: {"state": "waiting", "since": clock()}}
        assert set(listed(lifecycle=["waiting", "working"])) == {CHILD, PEER}
        assert listed(lifecycle=["ended"]) == {}
        assert "waiting since" in ok(gw.call_tool("sessions_list", {"lifecycle": "waiting"}, caller=MAIN))["text"]
        for bad in ("lost!", [], ["idle", 3], 7):
            err(gw.call_tool("sessions_list", {"lifecycle": bad}, caller=MAIN), "invalid_argument")

    def test_list_pages_keep_their_lifecycle_filter(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session(MAIN)
        keys = [f"agent:a:w{i}" for i in range(5)]
        for i, k in enumerate(keys):
            clock.advance(SECOND)
            gw.put_session(k)
            gw.report_lifecycle(k, "working" if i % 2 == 0 else "idle")
        first = ok(gw.call_tool("sessions_list", {"lifecycle": "working", "limit": 2}, caller=MAIN))
        assert [s["sessionKey"] for s in first["sessions"]] == [keys[4], keys[2]]
        second = ok(
            gw.call_tool(
                "sessions_list", {"lifecycle": "working", "limit": 2, "cursor": first["nextCursor"]}, caller=MAIN
            )
        )
        assert [s["sessionKey"] for s in second["sessions"]] == [keys[0]] and "nextCursor" not in second
        wrong = gw.call_tool("sessions_list", {"limit": 2, "cursor": first["nextCursor"]}, caller=MAIN)
        assert "different agentId/kinds filter" in err(wrong, "invalid_argument")
        plain = ok(gw.call_tool("sessions_list", {"limit": 2}, caller=MAIN))
        refused = gw.call_tool(
            "sessions_list", {"limit": 2, "lifecycle": "idle", "cursor": plain["nextCursor"]}, caller=MAIN
        )
        err(refused, "invalid_argument")

    def test_counts_per_state_for_every_or_some_agents(self, family: Gateway) -> None:
        gw = family
        gw.put_session("agent:b:main")
        gw.report_lifecycle(CHILD, "waiting")
        gw.report_lifecycle(MAIN, "working")
        gw.report_lifecycle("agent:b:main", "working")
        assert gw.store.lifecycle_counts() == {"waiting": 1, "working": 2}
        assert gw.store.lifecycle_counts(["a"]) == {"waiting": 1, "working": 1}
        assert gw.store.lifecycle_counts(["zzz"]) == {}

    def test_the_state_survives_a_restart(self, family: Gateway, clock: ManualClock) -> None:
        family.report_lifecycle(CHILD, "waiting", pid=4321, host="claude")
        since = clock()
        family.close()
        again = self.open_gateway(clock=clock)
        try:
            assert again.get_session(CHILD)["lifecycle"] == {"state": "waiting", "since": since}
            row = again.store.get_lifecycle(CHILD, "a")
            assert row is not None and row.pid == 4321
        finally:
            again.close()

    def test_deleting_a_session_deletes_its_state(self, family: Gateway) -> None:
        gw = family
        gw.report_lifecycle(CHILD, "working")
        gw.delete_session(CHILD)
        assert gw.store.get_lifecycle(CHILD, "a") is None and gw.store.lifecycle_counts() == {}
        gw.put_session(CHILD)
        assert "lifecycle" not in gw.get_session(CHILD)

    # -- the link in the notice --------------------------------------------------------------------------------
    def test_a_public_url_puts_the_sessions_dashboard_page_in_the_notice(self, clock: ManualClock) -> None:
        gw = self.open_gateway(clock=clock, settings=Settings(public_url="https://example.test/sw"))
        try:
            gw.put_session(MAIN)
            spawn(gw, MAIN, "kid")
            seen = gw.state_version(CHILD)
            gw.report_lifecycle(CHILD, "ended")
            expected = notice(CHILD, seen).replace(
                "(other actor). ",
                "(other actor). Open: <https://example.test/sw/ui/#session/agent%3Aa%3Asubagent%3Akid>. ",
            )
            assert texts(gw, MAIN) == [expected]
            # a hand-queued copy of the linked notice is that pair's notice (deduped), as in v1
            gw.enqueue_system_event(MAIN, expected, context_key=ctx(CHILD))
            assert texts(gw, MAIN) == [expected]
        finally:
            gw.close()

    # -- the rules against a model -----------------------------------------------------------------------------
    @pytest.mark.slow
    def test_lifecycle_machine_matches_the_model(self) -> None:
        machine = type(f"LifecycleMachine_{type(self).__name__}", (LifecycleMachine,), {"suite": self})
        examples = int(os.environ.get("SESSIONWATCH_STATEFUL_EXAMPLES", str(self.stateful_examples)))
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=max(10, examples // 2),
                stateful_step_count=30,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )


KIDS = ["agent:a:subagent:k1", "agent:a:subagent:k2"]
REPORTED = ("working", "waiting", "idle", "ended")
NOTIFYING = {"session_ended", "session_lost", "session_back"}


class LifecycleMachine(RuleBasedStateMachine):
    """MAIN spawns two children; reports (some late), clock moves, the lost timer, the parent's drains and
    restarts, against a model: per child the state, since and last seen, the expected typed events, and
    whether the parent has a notice pending."""

    suite: SuiteBase

    def __init__(self) -> None:
        super().__init__()
        from contextlib import ExitStack

        from .suite import Stores

        self.cleanup = ExitStack()
        self.suite._stores = Stores(self.suite, self.cleanup)
        self.clock = ManualClock()
        self.gw = self.suite.open_gateway(clock=self.clock, settings=Settings(lost_after_ms=LOST_AFTER))
        self.gw.put_session(MAIN)
        for k in KIDS:
            spawn(self.gw, MAIN, k.rsplit(":", 1)[1])
        # model
        self.state: dict[str, tuple[str, int, int] | None] = dict.fromkeys(KIDS)  # (state, since, seen)
        self.kinds: dict[str, list[str]] = {k: [] for k in KIDS}
        # the parent's cursor on each child, v1's watermarks: (lastSeen, notified, material)
        self.marks: dict[str, tuple[int, int, int]] = {}
        for k in KIDS:
            c = self.gw.cursors(watcher=MAIN, target=k)[0]
            self.marks[k] = (c["lastSeen"], c["notified"], c["material"])

    def teardown(self) -> None:
        self.gw.close()
        self.cleanup.close()

    def _expect(self, key: str, kind: str, got: list[dict[str, Any]]) -> None:
        self.kinds[key].append(kind)
        event = next(e for e in got if e["kind"] == kind and e["sessionKey"] == key)
        if kind in NOTIFYING:
            ls, notified, _ = self.marks[key]
            seq = int(event["sequence"])
            # a pending notice keeps its frozen watermark; a caught-up pair freezes at this event
            self.marks[key] = (ls, notified if notified > ls else seq, seq)

    @rule(key=st.sampled_from(KIDS), state=st.sampled_from(REPORTED), late=st.integers(0, 3))
    def report(self, key: str, state: str, late: int) -> None:
        now = self.clock()
        at = now - late * SECOND
        out = self.gw.report_lifecycle(key, state, at=at, outcome="failed" if state == "ended" and late else None)
        cur = self.state[key]
        if cur is None or (cur[0] != state and at >= cur[1]):
            if cur is not None and cur[0] == "lost":
                self._expect(key, "session_back", out["events"])
            self._expect(key, f"session_{state}", out["events"])
            self.state[key] = (state, at, now)
            assert out["changed"] is True
        elif cur[0] == state:
            self.state[key] = (cur[0], cur[1], max(cur[2], now))
            assert out["changed"] is False and not out["stale"]
        else:
            assert out["stale"] is True

    @rule(ms=st.sampled_from([SECOND, MINUTE, 5 * MINUTE, LOST_AFTER]))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def lost_timer(self) -> None:
        now = self.clock()
        events = self.gw.check_lost(now)
        got = sorted(e["sessionKey"] for e in events)
        want = []
        for key, cur in self.state.items():
            if cur is not None and cur[0] in ("working", "waiting") and cur[2] <= now - LOST_AFTER:
                want.append(key)
                self.state[key] = ("lost", max(now, cur[1]), cur[2])
                self._expect(key, "session_lost", events)
        assert got == sorted(want)

    @rule()
    def parent_drains(self) -> None:
        self.gw.drain_system_events(MAIN)
        for key, (_, notified, material) in self.marks.items():
            # v1's acknowledgement: lastSeen := the frozen watermark; material beyond it reopens once
            self.marks[key] = (notified, max(notified, material), material)

    @rule()
    def restart(self) -> None:
        self.gw.close()
        self.gw = self.suite.open_gateway(clock=self.clock, settings=Settings(lost_after_ms=LOST_AFTER))
        for key, (ls, notified, material) in self.marks.items():
            # the restart sweep re-materializes unacknowledged change: notified := material
            self.marks[key] = (ls, material if material > ls else notified, material)

    @invariant()
    def matches_the_model(self) -> None:
        queued = {e["contextKey"] for e in self.gw.peek_system_events(MAIN)}
        for key in KIDS:
            cur = self.state[key]
            got = self.gw.store.get_lifecycle(key, "a")
            if cur is None:
                assert got is None
            else:
                assert got is not None and (got.state, got.since, got.seen_at) == cur, (key, got, cur)
            assert kinds_of(self.gw, key) == self.kinds[key]
            c = self.gw.cursors(watcher=MAIN, target=key)[0]
            assert (c["lastSeen"], c["notified"], c["material"]) == self.marks[key], key
            ls, notified, _ = self.marks[key]
            assert (ctx(key) in queued) == (notified > ls), key
