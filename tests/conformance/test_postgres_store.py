"""The conformance suite (sessionwatch.testing) on the PostgreSQL backend: each test on a database of
its own (tests/support/pg.py). Skipped when the server is not reachable or SESSIONWATCH_TEST_PG=0."""

from __future__ import annotations

import os
from contextlib import ExitStack

import pytest

from sessionwatch.store.base import Store
from sessionwatch.testing import StoreConformance
from tests.support import pg

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.environ.get("SESSIONWATCH_TEST_PG", "1") == "0" or not pg.available(),
        reason="PostgreSQL is not reachable (or SESSIONWATCH_TEST_PG=0)",
    ),
]


class TestPostgresStore(StoreConformance):
    stateful_examples = 25  # each run makes its own database

    def make_store(self, cleanup: ExitStack) -> Store:
        from sessionwatch.store.postgres import PostgresStore

        return PostgresStore(cleanup.enter_context(pg.fresh_database()))

    def lower_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from sessionwatch.store.postgres import log as postgres_log

        monkeypatch.setattr(postgres_log, "PRUNE_BATCH", 3)
        monkeypatch.setattr(postgres_log, "CURSOR_SLICE", 2)
