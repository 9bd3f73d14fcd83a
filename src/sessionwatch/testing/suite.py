"""What every part of the conformance suite relies on: the hooks a backend implements and the stores
of one test (``StoreConformance`` in conformance.py adds the pytest fixtures)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import ExitStack
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.store.base import Store


class SuiteBase(ABC):
    """The hooks of the suite. A backend implements :meth:`make_store`; the others have defaults."""

    #: examples of the hypothesis state machine (``$SESSIONWATCH_STATEFUL_EXAMPLES`` overrides it)
    stateful_examples: int = 100

    _stores: Stores  # this test's stores (set by StoreConformance's autouse fixture)

    @abstractmethod
    def make_store(self, cleanup: ExitStack) -> Store:
        """A new, empty store of your backend. Register on ``cleanup`` whatever removes it after the test
        (a temporary folder, a database); the suite closes its stores before ``cleanup`` runs."""

    def reopen_store(self, store: Store) -> Store:
        """Another store object on the same data as ``store`` (a restart, or a second process). The
        default calls ``type(store)(store.url)``; override it when your constructor differs."""
        opener: Any = type(store)
        reopened: Store = opener(store.url)
        return reopened

    def lower_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: B027 - optional: a no-op unless overridden
        """Optional: lower your prune's batch size to 3 rows and its stale-cursor slice to 2 (with
        ``monkeypatch``), so the flat-cost tests cross batch boundaries on a small store. Without it they
        still check the results, within one batch."""

    def open_gateway(self, **kwargs: Any) -> Gateway:
        """A gateway on this test's store (the first call makes the store; later calls reopen it)."""
        return Gateway(self._stores.open(), **kwargs)


class Stores:
    """The stores of one test (or one state-machine run): the first ``open()`` makes a new, empty store,
    every later one reaches the same data again (a restart, or a second process beside the first)."""

    def __init__(self, suite: SuiteBase, cleanup: ExitStack) -> None:
        self.suite = suite
        self.cleanup = cleanup
        self.first: Store | None = None

    def open(self) -> Store:
        if self.first is None:
            self.first = self.suite.make_store(self.cleanup)
            return self.first
        return self.suite.reopen_store(self.first)
