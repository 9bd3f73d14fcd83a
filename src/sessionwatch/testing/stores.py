"""The stores of one test: made by the suite's ``make_store``, reopened by its ``reopen_store``."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

from sessionwatch.store.base import Store

if TYPE_CHECKING:
    from .conformance import StoreConformance


class Stores:
    """The stores of one test (or one state-machine run): the first ``open()`` makes a new, empty store,
    every later one reaches the same data again (a restart, or a second process beside the first)."""

    def __init__(self, suite: StoreConformance, cleanup: ExitStack) -> None:
        self.suite = suite
        self.cleanup = cleanup
        self.first: Store | None = None

    def open(self) -> Store:
        if self.first is None:
            self.first = self.suite.make_store(self.cleanup)
            return self.first
        return self.suite.reopen_store(self.first)
