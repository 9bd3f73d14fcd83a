"""SQLite: bearer tokens scoped to agents (a mixin of SQLiteStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .records import TokenRow, dumps, loads

TOKEN_COLS = "token_id, token_hash, name, agents, admin, created_at, revoked_at"


def token_from_row(row: Any) -> TokenRow:
    return TokenRow(row[0], row[1], row[2], tuple(loads(row[3])), bool(row[4]), row[5], row[6])


class TokensMixin:
    _lock: Any
    _conn: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def create_token(self, token: TokenRow) -> TokenRow:
        with self._tx() as conn:
            conn.execute(f"INSERT INTO tokens ({TOKEN_COLS}) VALUES (?,?,?,?,?,?,?)",
                         (token.token_id, token.token_hash, token.name, dumps(list(token.agents)),
                          int(token.admin), token.created_at, token.revoked_at))
        return token

    def get_token(self, token_id: str) -> TokenRow | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {TOKEN_COLS} FROM tokens WHERE token_id = ?", (token_id,)).fetchone()
        return None if row is None else token_from_row(row)

    def tokens(self) -> list[TokenRow]:
        with self._lock:
            return [token_from_row(r) for r in self._conn.execute(
                f"SELECT {TOKEN_COLS} FROM tokens ORDER BY created_at, token_id")]

    def revoke_token(self, token_id: str, now: int) -> bool:
        with self._tx() as conn:
            return conn.execute("UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
                                (now, token_id)).rowcount > 0
