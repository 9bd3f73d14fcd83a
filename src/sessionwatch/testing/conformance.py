"""The store conformance suite as one base class: subclass it, say how to make your store, run pytest.

The tests go through the public ``Gateway`` API only, so they hold every backend to the same
user-visible behaviour: the signal log, ids scoped to their agent, watchers and the notice queue,
delivery, delivery leases and reconciliation, sweep and prune, wakes, bad input, tokens, data settings, listing pages,
flat costs, lifecycle states and hypothesis state machines against a reference model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock

from .agent_scope import AgentScopeTests
from .bad_input import BadInputTests
from .data_settings import DataSettingsTests
from .delivery import DeliveryTests
from .edge_input import EdgeInputTests
from .flat_costs import FlatCostTests
from .helpers import MAIN, spawn
from .hostile_text import HostileTextTests
from .leases import LeaseTests
from .lifecycle import LifecycleTests
from .list_pages import ListPageTests
from .queue import QueueTests
from .reconciliation import ReconciliationTests
from .signal_log import SignalLogTests
from .stateful import StatefulTests
from .suite import Stores
from .sweep_prune import SweepPruneTests
from .tokens import TokenTests
from .wakes import WakeTests
from .watchers import WatcherTests


class StoreConformance(
    SignalLogTests,
    AgentScopeTests,
    WatcherTests,
    QueueTests,
    DeliveryTests,
    LeaseTests,
    ReconciliationTests,
    SweepPruneTests,
    WakeTests,
    BadInputTests,
    EdgeInputTests,
    HostileTextTests,
    TokenTests,
    DataSettingsTests,
    ListPageTests,
    FlatCostTests,
    LifecycleTests,
    StatefulTests,
):
    """Subclass as ``Test<YourStore>`` in a test module and implement :meth:`make_store`; pytest collects
    every inherited test for your store (this base class itself is not collected: its name does not start
    with ``Test``). The hooks are ``SuiteBase``'s (suite.py). Needs the ``testing`` extra:
    ``pip install -e '.[testing]'`` in a clone."""

    # -- fixtures the tests use ---------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    def _conformance_stores(self) -> Iterator[None]:
        with ExitStack() as cleanup:
            self._stores = Stores(self, cleanup)
            yield

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def gw(self, clock: ManualClock) -> Iterator[Gateway]:
        gateway = self.open_gateway(clock=clock)
        yield gateway
        gateway.close()

    @pytest.fixture
    def family(self, gw: Gateway) -> Gateway:
        """main spawned agent:a:subagent:kid (run-1) and watches it."""
        gw.put_session(MAIN)
        spawn(gw, MAIN, "kid", run_id="run-1")
        return gw
