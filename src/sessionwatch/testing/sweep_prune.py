"""The restart sweep and retention pruning (age, row cap, exact historyGap, cursor expiry, throttling)."""

from __future__ import annotations

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock

from .helpers import CHILD, DAY, MAIN, MINUTE, cursor, human, log, marks, notice, send, spawn, texts
from .suite import SuiteBase

PEER = "agent:a:peer"


def _family(gw: Gateway) -> int:
    gw.put_session(MAIN)
    gw.put_session(PEER)
    version: int = spawn(gw, MAIN, "kid", run_id="run-1")["stateVersion"]
    return version


def _evict(gw: Gateway, key: str) -> None:
    for i in range(20):
        gw.enqueue_system_event(key, f"filler {i}", context_key="filler")


class SweepPruneTests(SuiteBase):
    """The restart sweep and retention pruning (age, row cap, exact historyGap, cursor expiry, throttling)."""

    # -- the restart sweep -----------------------------------------------------------------------------------
    def test_sweep_rematerializes_a_notice_evicted_by_the_cap(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            spawned = _family(gw)
            seq = human(gw, CHILD)["event"]["sequence"]
            _evict(gw, MAIN)
            assert notice(CHILD, spawned) not in texts(gw, MAIN)
        clock.advance(MINUTE)
        with self.open_gateway(clock=clock) as gw:
            assert gw.swept == 1
            queue = texts(gw, MAIN)
            assert len(queue) == 20 and queue[-1] == notice(CHILD, spawned) and queue[0] == "filler 1"
            c = cursor(gw, MAIN, CHILD)
            assert c is not None and (c["lastSeen"], c["notified"], c["material"]) == (spawned, seq, seq)
            assert c["updatedAt"] == clock()
            gw.drain_system_events(MAIN)
            assert marks(gw, MAIN, CHILD) == (seq, seq, seq) and texts(gw, MAIN) == []

    def test_sweep_freezes_at_material_so_a_later_drain_does_not_reopen(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            spawned = _family(gw)
            first = human(gw, CHILD)["event"]["sequence"]
            last = gw.set_goal(CHILD, "create", objective="o")["event"]["sequence"]
            assert marks(gw, MAIN, CHILD) == (spawned, first, last)
        with self.open_gateway(clock=clock) as gw:
            assert marks(gw, MAIN, CHILD) == (spawned, last, last)
            assert texts(gw, MAIN) == [notice(CHILD, spawned)]  # still exactly one
            gw.drain_system_events(MAIN)
            assert marks(gw, MAIN, CHILD) == (last, last, last)
            assert texts(gw, MAIN) == []

    def test_sweep_skips_watchers_whose_session_does_not_exist(self, clock: ManualClock) -> None:
        ghost = "agent:a:ghost"
        with self.open_gateway(clock=clock) as gw:
            _family(gw)
            assert gw.watch(ghost, CHILD) is True  # a watch held by a session the host never created
            human(gw, CHILD)
            human(gw, CHILD)
            _evict(gw, ghost)
            before = cursor(gw, ghost, CHILD)
            assert before is not None and before["notified"] < before["material"]
        clock.advance(MINUTE)
        with self.open_gateway(clock=clock) as gw:
            assert cursor(gw, ghost, CHILD) == before
            assert texts(gw, ghost) == [f"filler {i}" for i in range(20)]
            assert gw.swept == 1  # main's row only

    def test_sweep_of_acknowledged_rows_does_nothing(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            _family(gw)
            human(gw, CHILD)
            gw.drain_system_events(MAIN)
            before = gw.cursors()
        clock.advance(MINUTE)
        with self.open_gateway(clock=clock) as gw:
            assert gw.swept == 0
            assert gw.cursors() == before and texts(gw, MAIN) == []
            assert gw.sweep() == 0

    def test_sweep_keeps_ambient_notices_queue_only(self, clock: ManualClock) -> None:
        group = "agent:a:telegram:group:g1"
        with self.open_gateway(clock=clock) as gw:
            _family(gw)
            gw.put_session(group)
            human(gw, group)
            gw.enqueue_system_event(MAIN, "cron: x", context_key="cron:x")
            human(gw, group)
        with self.open_gateway(clock=clock) as gw:
            assert texts(gw, MAIN) == [notice(group, 0), "cron: x"]  # not duplicated
            assert cursor(gw, MAIN, group)["provenance"] == "ambient-group"  # type: ignore[index]

    # -- retention -------------------------------------------------------------------------------------------
    def test_events_older_than_30_days_go_and_history_gap_is_exact(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session("agent:a:x")
        gw.put_session("agent:a:y")
        a1 = gw.record_compaction("agent:a:x", "1")["event"]["sequence"]
        a2 = gw.record_compaction("agent:a:x", "2")["event"]["sequence"]
        clock.advance(10 * DAY)
        a3 = gw.record_compaction("agent:a:x", "3")["event"]["sequence"]
        b1 = gw.record_compaction("agent:a:y", "y1")["event"]["sequence"]
        clock.advance(20 * DAY)
        gw.prune(force=True)
        assert [e["sequence"] for e in log(gw)] == [a1, a2, a3, b1]  # exactly 30 days old is kept
        clock.advance(1)
        result = gw.prune(force=True)
        assert result.rows_deleted == 2 and not result.skipped
        assert [e["sequence"] for e in log(gw)] == [a3, b1]
        for after, gap in [(0, True), (a1, True), (a2 - 1, True), (a2, False), (a3, False)]:
            page = gw.changes_since("agent:a:x", after)
            assert page.history_gap is gap, after
            assert page.earliest_available_sequence == a3
        assert gw.changes_since("agent:a:y", 0).history_gap is False
        assert gw.state_version("agent:a:x") == a3
        clock.advance(11 * DAY)
        gw.prune(force=True)
        page = gw.changes_since("agent:a:x", 0)
        assert page.events == [] and page.history_gap is True
        assert page.earliest_available_sequence == a3 + 1  # head + 1 when nothing is retained
        assert gw.changes_since("agent:a:x", a3).history_gap is False
        assert gw.changes_since("agent:a:never", 0).to_json() == {
            "events": [],
            "truncated": False,
            "earliestAvailableSequence": 0,
            "historyGap": False,
        }

    def test_row_cap_keeps_the_newest_rows_and_stamps_watermarks(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=5)) as gw:
            gw.put_session("agent:a:x")
            gw.put_session("agent:a:y")
            seqs = []
            for i in range(8):
                key = "agent:a:x" if i % 2 == 0 else "agent:a:y"
                seqs.append((key, gw.record_compaction(key, str(i))["event"]["sequence"]))
            result = gw.prune(force=True)
            assert result.rows_deleted == 3
            kept = [s for _, s in seqs[3:]]
            assert [e["sequence"] for e in log(gw)] == kept
            x_pruned = max(s for k, s in seqs[:3] if k == "agent:a:x")
            y_pruned = max(s for k, s in seqs[:3] if k == "agent:a:y")
            assert gw.changes_since("agent:a:x", x_pruned - 1).history_gap is True
            assert gw.changes_since("agent:a:x", x_pruned).history_gap is False
            assert gw.changes_since("agent:a:y", y_pruned - 1).history_gap is True
            assert gw.changes_since("agent:a:y", y_pruned).history_gap is False
            assert gw.prune(force=True).rows_deleted == 0

    def test_a_manually_deleted_session_never_makes_a_gap(self, gw: Gateway) -> None:
        gw.put_session("agent:a:x")
        gw.put_session("agent:a:y")
        gw.record_compaction("agent:a:x", "1")
        y = gw.record_compaction("agent:a:y", "y1")["event"]["sequence"]
        gw.record_compaction("agent:a:x", "2")
        gw.delete_session("agent:a:y")
        gw.prune(force=True)
        # the global sequence is sparse for x, which is not a gap
        assert gw.changes_since("agent:a:x", 0).history_gap is False
        assert gw.changes_since("agent:a:x", y).history_gap is False

    def test_cursors_untouched_for_30_days_expire(self, gw: Gateway, clock: ManualClock) -> None:
        _family(gw)
        gw.put_session("agent:a:other")
        send(gw, PEER, "agent:a:other", watch=True)
        t0 = clock()
        clock.advance(20 * DAY)
        gw.set_goal("agent:a:other", "create", objective="o")  # touches PEER's cursor
        clock.now = t0 + 30 * DAY
        gw.prune(force=True)
        assert cursor(gw, MAIN, CHILD) is not None  # exactly 30 days: kept
        clock.advance(1)
        assert gw.prune(force=True).cursors_deleted == 1
        assert cursor(gw, MAIN, CHILD) is None
        assert cursor(gw, PEER, "agent:a:other") is not None

    def test_drain_touches_cursors_so_they_survive(self, gw: Gateway, clock: ManualClock) -> None:
        _family(gw)
        human(gw, CHILD)
        clock.advance(25 * DAY)
        gw.drain_system_events(MAIN)
        clock.advance(10 * DAY)
        gw.prune(force=True)
        assert cursor(gw, MAIN, CHILD) is not None

    def test_pruning_after_recording_is_throttled_to_once_an_hour(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=3)) as gw:
            gw.put_session("agent:a:x")
            for i in range(6):
                gw.record_compaction("agent:a:x", f"a{i}")
            assert len(log(gw)) == 6  # the open-time prune ran moments ago
            clock.advance(59 * MINUTE)
            gw.record_compaction("agent:a:x", "b")
            assert len(log(gw)) == 7
            clock.advance(MINUTE)
            last = gw.record_compaction("agent:a:x", "c")["event"]["sequence"]
            assert len(log(gw)) == 8  # the recording found the prune due but never waits for it ...
            gw.run_due()  # ... the timer runs it
            assert len(log(gw)) == 3 and log(gw)[-1]["sequence"] == last
            gw.record_compaction("agent:a:x", "d")
            gw.record_compaction("agent:a:x", "e")
            assert len(log(gw)) == 5
            assert gw.prune(force=False).skipped is True
            assert len(log(gw)) == 5
            assert gw.prune(force=True).skipped is False
            assert len(log(gw)) == 3

    def test_the_restart_sweep_forces_a_prune(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=3)) as gw:
            gw.put_session("agent:a:x")
            for i in range(6):
                gw.record_compaction("agent:a:x", f"a{i}")
            assert len(log(gw)) == 6
        with self.open_gateway(clock=clock, settings=Settings(max_events=3)) as gw:
            assert len(log(gw)) == 3
        clock.advance(31 * DAY)
        with self.open_gateway(clock=clock) as gw:
            assert log(gw) == [] and gw.state_version("agent:a:x") > 0

    def test_log_bounds_report_the_pruned_watermark_like_changes_since(self, clock: ManualClock) -> None:
        """What a resuming log-stream reader is told (Store.log_bounds) agrees with changesSince's facts."""
        with self.open_gateway(clock=clock, settings=Settings(max_events=3)) as gw:
            empty = gw.log_bounds()
            assert (empty.earliest, empty.last, empty.pruned) == (0, 0, 0)
            _family(gw)
            for _ in range(4):
                human(gw, CHILD)
            gw.put_session("agent:b:main")
            gw.watch("agent:b:main", "agent:b:other")
            everything = [e["sequence"] for e in gw.events_after(0, 1000)]
            clock.advance(MINUTE)
            gw.prune()
            kept = [e["sequence"] for e in gw.events_after(0, 1000)]
            assert len(kept) == 3 and kept == everything[-3:]
            whole = gw.log_bounds()
            assert whole.pruned_at == clock()
            assert (whole.earliest, whole.last, whole.pruned) == (kept[0], everything[-1], everything[-4])
            assert whole.gap(kept[0] - 2) and not whole.gap(kept[0] - 1)
            one = gw.log_bounds(session=(CHILD, "a"))
            page = gw.changes_since(CHILD, 0)
            assert (one.earliest, one.gap(0)) == (page.earliest_available_sequence, page.history_gap)
            assert gw.log_bounds(agents=frozenset({"a"})).pruned == whole.pruned
            assert gw.log_bounds(agents=frozenset({"zzz"})).pruned == 0
