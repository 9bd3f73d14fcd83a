"""Data settings stored with the store (issue 8 item 4)."""

from __future__ import annotations

import pytest

from sessionwatch import Conflict, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.settings import settings_from_env

from .helpers import MAIN
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
