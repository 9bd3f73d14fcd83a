"""Administration: the bearer tokens and the data settings a store keeps for its operators.

``sessionwatch token`` and ``sessionwatch settings`` change them, the gateway's authenticator reads the
tokens. These writes are what those commands are run for, so they are made on a gateway opened
``read_only`` too: that flag keeps opening and the engine's own upkeep (sweep, prune, timers, storing the
missing data settings) from writing, which a token or settings command must not do behind its back.
``sessionwatch.tokens`` (and the hashing and randomness it uses) loads on first use: the hook's run
opens a gateway too, and never handles a token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import SessionwatchError, StoreUnavailable
from ..settings import DATA_SETTINGS, Settings
from ..store.records import TokenRow
from .core import GatewayCore


class Administration(GatewayCore):
    """Stored tokens (create, list, look up, revoke) and the stored data settings (read, change)."""

    # -- bearer tokens (sessionwatch.tokens: only the hash is kept) --------------------------------
    def create_token(
        self, *, agents: Iterable[str] = (), admin: bool = False, name: str | None = None
    ) -> tuple[str, TokenRow]:
        """Store a new token, admin or scoped to ``agents``; returns (its text, shown once; its row)."""
        from .. import tokens as stored_tokens

        return stored_tokens.create_token(self.store, agents=agents, admin=admin, name=name, now=self.clock())

    def list_tokens(self) -> list[TokenRow]:
        """Every stored token, revoked ones too, oldest first (rows, never the token texts)."""
        return self.store.tokens()

    def token(self, token_id: str) -> TokenRow | None:
        """The row of stored token ``token_id``, or None."""
        return self.store.get_token(token_id)

    def revoke_token(self, token_id: str) -> bool:
        """True when the token was live and is now revoked, False when it was already; NotFound without it."""
        from .. import tokens as stored_tokens

        return stored_tokens.revoke_token(self.store, token_id, now=self.clock())

    # -- data settings (docs/cli.md; engine/data_settings.py resolves a process's against them) ---------
    def stored_data_settings(self) -> dict[str, int]:
        """The data settings stored with the store (empty until a process first stored them)."""
        try:
            return self.store.data_settings()
        except Exception as exc:  # a store error too: "cannot read" says which step failed
            raise StoreUnavailable(f"cannot read the data settings: {exc.__class__.__name__}: {exc}") from exc

    def set_data_settings(self, changes: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """Change stored data settings in one transaction; returns (old, new) values. Values are checked
        by the caller (``settings.check_value``). Processes sharing the store pick them up within 10 s."""
        try:
            defaults = Settings()
            # a store nobody opened yet gets the defaults for what is not being set, as its first opener would
            self.store.init_data_settings({n: getattr(defaults, n) for n in DATA_SETTINGS}, self.clock())
            return self.store.set_data_settings(changes, self.clock())
        except SessionwatchError:
            raise
        except Exception as exc:
            raise StoreUnavailable(f"cannot change the data settings: {exc.__class__.__name__}: {exc}") from exc
