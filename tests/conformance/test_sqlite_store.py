"""The conformance suite (sessionwatch.testing) on the SQLite backend."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest

from sessionwatch.store.base import Store, Tokens
from sessionwatch.store.records import TokenRow
from sessionwatch.store.sqlite import SQLiteStore, SQLiteTokens, log as sqlite_log
from sessionwatch.testing import StoreConformance


class TestSQLiteStore(StoreConformance):
    def make_store(self, cleanup: ExitStack) -> SQLiteStore:
        folder = tempfile.mkdtemp(prefix="sw-conformance-")
        cleanup.callback(shutil.rmtree, folder, True)
        return SQLiteStore(f"sqlite:///{folder}/state.db")

    def lower_batches(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sqlite_log, "PRUNE_BATCH", 3)
        monkeypatch.setattr(sqlite_log, "CURSOR_SLICE", 2)


def _issue_and_revoke(tokens: Tokens) -> None:
    """Code that needs one role types against it."""
    tokens.create_token(TokenRow("t1", "hash", "ci", ("ops",), False, 1000, None))
    assert tokens.revoke_token("t1", 2000) is True


def test_one_role_opens_alone_on_the_same_file(tmp_path: Path) -> None:
    """A role class is the connection plus that role's methods: ``SQLiteTokens`` opens the file alone,
    and the full store sees what it wrote."""
    url = f"sqlite:///{tmp_path}/state.db"
    tokens_only = SQLiteTokens(url)
    assert not isinstance(tokens_only, Store) and isinstance(tokens_only, Tokens)
    _issue_and_revoke(tokens_only)
    tokens_only.close()
    store = SQLiteStore(url)
    try:
        row = store.get_token("t1")
        assert row is not None and row.agents == ("ops",) and row.revoked_at == 2000
        assert [t.token_id for t in store.tokens()] == ["t1"]
    finally:
        store.close()
