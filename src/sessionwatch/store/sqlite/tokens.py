"""SQLite: bearer tokens scoped to agents (the ``Tokens`` role)."""

from __future__ import annotations

from ..base import Tokens
from ..records import TokenRow, dumps
from ..rows import TOKEN_COLS, token_from_row
from .connection import SQLiteConnection


class SQLiteTokens(SQLiteConnection, Tokens):
    def create_token(self, token: TokenRow) -> TokenRow:
        with self._tx() as conn:
            conn.execute(
                f"INSERT INTO tokens ({TOKEN_COLS}) VALUES (?,?,?,?,?,?,?)",
                (
                    token.token_id,
                    token.token_hash,
                    token.name,
                    dumps(list(token.agents)),
                    int(token.admin),
                    token.created_at,
                    token.revoked_at,
                ),
            )
        return token

    def get_token(self, token_id: str) -> TokenRow | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {TOKEN_COLS} FROM tokens WHERE token_id = ?", (token_id,)).fetchone()
        return None if row is None else token_from_row(row)

    def tokens(self) -> list[TokenRow]:
        with self._lock:
            return [
                token_from_row(r)
                for r in self._conn.execute(f"SELECT {TOKEN_COLS} FROM tokens ORDER BY created_at, token_id")
            ]

    def revoke_token(self, token_id: str, now: int) -> bool:
        with self._tx() as conn:
            return (
                conn.execute(
                    "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", (now, token_id)
                ).rowcount
                > 0
            )
