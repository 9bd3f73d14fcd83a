"""Data settings stored with the store (issue 8 item 4)."""

from __future__ import annotations

import pytest

from sessionwatch import Conflict, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.settings import settings_from_env

from .helpers import MAIN, human, notice, texts
from .suite import SuiteBase


class DataSettingsTests(SuiteBase):
    """Data settings stored with the store (issue 8 item 4)."""

    def test_the_first_opener_stores_its_values_and_later_ones_use_them(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(queue_cap=4, max_events=900)) as gw:
            assert gw.store.data_settings() == {
                "queue_cap": 4,
                "max_events": 900,
                "retention_ms": 30 * 86_400_000,
                "wake_coalesce_ms": 20_000,
            }
        with self.open_gateway(clock=clock) as gw:  # no settings given: the stored ones apply
            assert (gw.settings.queue_cap, gw.settings.max_events) == (4, 900)
        with self.open_gateway(clock=clock, settings=Settings(queue_cap=4)) as gw:  # agreeing is fine
            assert gw.settings.max_events == 900

    def test_a_conflicting_value_names_both_and_the_command(self, clock: ManualClock) -> None:
        self.open_gateway(clock=clock).close()
        env = settings_from_env(environ={"SESSIONWATCH_QUEUE_CAP": "7"})
        with pytest.raises(Conflict) as info:
            self.open_gateway(clock=clock, settings=env)
        message = info.value.message
        assert "SESSIONWATCH_QUEUE_CAP=7" in message and "queue_cap 20" in message
        assert "sessionwatch settings set --queue-cap 7" in message
        with pytest.raises(Conflict, match=r"Settings\(max_events=5\)"):
            self.open_gateway(clock=clock, settings=Settings(max_events=5))

    def test_read_only_opening_writes_nothing(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock, settings=Settings(max_events=3), read_only=True) as gw:
            assert gw.store.data_settings() == {}  # nothing stored by a read-only process
            assert gw.settings.max_events == 3 and gw.list_sessions() == []
        with self.open_gateway(clock=clock, settings=Settings(max_events=3)) as gw:
            gw.put_session(MAIN)
            for i in range(6):
                gw.record_compaction(MAIN, f"op-{i}")
        # a read-only open and a client open (prune_on_open=False) leave six rows above the cap of three
        for kwargs in ({"read_only": True}, {"prune_on_open": False}):
            with self.open_gateway(clock=clock, **kwargs) as gw:
                assert len(gw.events_after(0)) == 6, kwargs
        with self.open_gateway(clock=clock) as gw:  # a gateway's open prunes to the stored cap
            assert len(gw.events_after(0)) == 3

    def test_a_running_process_picks_up_a_change(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            old, new = gw.store.set_data_settings({"queue_cap": 2, "wake_coalesce_ms": 500}, clock())
            assert (old["queue_cap"], new["queue_cap"]) == (20, 2)
            gw.run_due(clock() + 1000)
            assert gw.settings.queue_cap == 20  # not yet: checked every 10 s
            gw.run_due(clock() + 10_000)
            assert gw.settings.queue_cap == 2 and gw.settings.wake_coalesce_ms == 500

    def test_raising_the_queue_cap_revives_older_notices_of_a_compacted_queue(self, clock: ManualClock) -> None:
        """Entries are live by a threshold on their append index, so a larger cap makes older appends live
        again, also those a compaction had already left behind (the store relinks its slot chains)."""
        targets = [f"agent:a:t{i}" for i in range(6)]
        with self.open_gateway(clock=clock, settings=Settings(queue_cap=4)) as gw:
            gw.put_session(MAIN)
            seen = {}
            for t in targets:
                gw.put_session(t)
                assert gw.watch(MAIN, t)
                seen[t] = gw.state_version(t)
            for t in targets:
                human(gw, t)
            assert texts(gw, MAIN) == [notice(t, seen[t]) for t in targets[2:]]
            third = next(e for e in gw.peek_system_events(MAIN) if e["text"] == notice(targets[3], seen[targets[3]]))
            gw.ack_system_events(MAIN, [third["id"]])  # a removal from the middle: the queue is compacted
            # ... and the room it made takes back the oldest notice the cap evicted (issue 19)
            assert texts(gw, MAIN) == [notice(t, seen[t]) for t in (targets[2], targets[4], targets[5], targets[0])]
            gw.store.set_data_settings({"queue_cap": 8}, clock())
        with self.open_gateway(clock=clock) as gw:
            assert gw.settings.queue_cap == 8
            # the other evicted append is live again under the larger cap, in its old place
            order = (targets[1], targets[2], targets[4], targets[5], targets[0])
            assert texts(gw, MAIN) == [notice(t, seen[t]) for t in order]
