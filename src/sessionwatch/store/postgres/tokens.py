"""PostgreSQL: bearer tokens scoped to agents (the ``Tokens`` role)."""

from __future__ import annotations

from ..base import Tokens
from ..records import TokenRow, dumps
from ..rows import TOKEN_COLS, token_from_row
from .connection import PostgresConnection


class PostgresTokens(PostgresConnection, Tokens):
    def create_token(self, token: TokenRow) -> TokenRow:
        # The id is ours (random), so a run again after a lost connection finds the first run's row.
        self._run(
            lambda c: c.execute(
                f"INSERT INTO tokens ({TOKEN_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (token_id) DO NOTHING",
                (
                    token.token_id,
                    token.token_hash,
                    token.name,
                    dumps(list(token.agents)),
                    token.admin,
                    token.created_at,
                    token.revoked_at,
                ),
            )
        )
        return token

    def get_token(self, token_id: str) -> TokenRow | None:
        row = self._one(f"SELECT {TOKEN_COLS} FROM tokens WHERE token_id = %s", (token_id,))
        return None if row is None else token_from_row(row)

    def tokens(self) -> list[TokenRow]:
        return [token_from_row(r) for r in self._all(f"SELECT {TOKEN_COLS} FROM tokens ORDER BY created_at, token_id")]

    def revoke_token(self, token_id: str, now: int) -> bool:
        row = self._one(
            "UPDATE tokens SET revoked_at = %s WHERE token_id = %s AND revoked_at IS NULL RETURNING token_id",
            (now, token_id),
        )
        return row is not None
