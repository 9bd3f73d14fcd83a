"""The conformance suite (sessionwatch.testing) on the SQLite backend."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import ExitStack

import pytest

from sessionwatch.store.sqlite import SQLiteStore
from sessionwatch.store.sqlite import log as sqlite_log
from sessionwatch.testing import StoreConformance


class TestSQLiteStore(StoreConformance):
    def make_store(self, cleanup: ExitStack) -> SQLiteStore:
        folder = tempfile.mkdtemp(prefix="sw-conformance-")
        cleanup.callback(shutil.rmtree, folder, True)
        return SQLiteStore(f"sqlite:///{folder}/state.db")

    def lower_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sqlite_log, "PRUNE_BATCH", 3)
        monkeypatch.setattr(sqlite_log, "CURSOR_SLICE", 2)
