"""Prune and restart cost what they do, not the size of the store (issue 11), seen as behaviour.

The backend's batch size and cursor slice are lowered (``StoreConformance.lower_batches``) so a small
store crosses them."""

from __future__ import annotations

import pytest

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock

from .helpers import DAY
from .suite import SuiteBase


def _log(gw: Gateway) -> list[int]:
    return [e["sequence"] for e in gw.events_after(0, 1000)]


class FlatCostTests(SuiteBase):
    """Prune and restart cost what they do, not the size of the store (issue 11)."""

    @pytest.fixture
    def small_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lower_batches(monkeypatch)

    def test_the_cap_keeps_exactly_the_newest_rows_across_batches_and_deletes(
        self, clock: ManualClock, small_batches: None
    ) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=4)) as gw:
            for key in ("agent:a:x", "agent:a:y", "agent:a:z"):
                gw.put_session(key)
            seqs = [gw.record_compaction("agent:a:x", f"x{i}")["event"]["sequence"] for i in range(5)]
            gw.record_compaction("agent:a:y", "y")  # a hole once y is deleted
            assert gw.prune(force=True).rows_deleted == 2  # 6 rows, cap 4
            gw.delete_session("agent:a:y")  # the kept row count follows deletes too
            seqs += [gw.record_compaction("agent:a:z", f"z{i}")["event"]["sequence"] for i in range(8)]
            result = gw.prune(force=True)  # 3 + 8 rows, cap 4: 7 deleted in batches of 3
            assert result.rows_deleted == 7
            assert _log(gw) == seqs[-4:]
            assert gw.changes_since("agent:a:x", 0).history_gap is True
            assert gw.changes_since("agent:a:z", seqs[-5]).history_gap is False
            assert gw.changes_since("agent:a:z", seqs[-5] - 1).history_gap is True
            assert gw.prune(force=True).rows_deleted == 0

    def test_age_prune_in_batches_stamps_every_head(self, clock: ManualClock, small_batches: None) -> None:
        with self.open_gateway(clock=clock) as gw:
            for i in range(4):
                gw.put_session(f"agent:a:s{i}")
            last = {
                f"agent:a:s{i % 4}": gw.record_compaction(f"agent:a:s{i % 4}", str(i))["event"]["sequence"]
                for i in range(10)
            }
            clock.advance(31 * DAY)
            assert gw.prune(force=True).rows_deleted == 10
            for key, seq in last.items():
                page = gw.changes_since(key, seq - 1)
                assert page.events == [] and page.history_gap is True
                assert gw.changes_since(key, seq).history_gap is False

    def test_stale_cursors_go_a_slice_per_prune(self, clock: ManualClock, small_batches: None) -> None:
        with self.open_gateway(clock=clock) as gw:
            gw.put_session("agent:a:t")
            for i in range(5):
                gw.put_session(f"agent:a:w{i}")
                gw.watch(f"agent:a:w{i}", "agent:a:t")
            clock.advance(31 * DAY)
            gw.put_session("agent:a:fresh")
            gw.watch("agent:a:fresh", "agent:a:t")
            deleted = [gw.prune(force=True).cursors_deleted for _ in range(4)]
            assert max(deleted) <= 2 and sum(deleted) == 5  # at most a slice per prune, all of them in the end
            assert [c["watcher"] for c in gw.cursors()] == ["agent:a:fresh"]

    def test_a_recording_never_runs_the_due_prune_itself(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=2)) as gw:
            gw.put_session("agent:a:x")
            clock.advance(2 * 60 * 60 * 1000)
            for i in range(4):
                gw.record_compaction("agent:a:x", str(i))
            assert len(_log(gw)) == 4
            gw.run_due()  # the timer's tick
            assert len(_log(gw)) == 2
