"""Bearer tokens kept in the store: creation, verification and revocation.

A stored token reads ``sw_<id>_<secret>``: the id (12 hex digits) names the row, the secret carries 256
random bits. The store keeps only the SHA-256 of the whole text, so a leaked database holds no usable
token; the text is shown once, when it is created. Verification looks the row up by id and compares the
hashes in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable

from .access import Principal, scoped
from .clock import system_clock
from .errors import InvalidArgument, NotFound
from .keys import check_agent_id
from .store.base import Store
from .store.records import TokenRow

PREFIX = "sw_"
_SHAPE = re.compile(r"sw_([0-9a-f]{12})_[A-Za-z0-9_-]{20,}")


def random_token() -> str:
    """A strong random token with no store behind it (``serve --token``, ``node --token``)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_id_of(token: str) -> str | None:
    """The row id a stored token names, or None when the text is not shaped like one."""
    m = _SHAPE.fullmatch(token)
    return m.group(1) if m else None


def create_token(
    store: Store, *, agents: Iterable[str] = (), admin: bool = False, name: str | None = None, now: int | None = None
) -> tuple[str, TokenRow]:
    """Store a new token; returns (token text, row). The text is not kept anywhere: show it once."""
    agent_ids = tuple(dict.fromkeys(check_agent_id(a, "agent") for a in agents))
    if admin and agent_ids:
        raise InvalidArgument("a token is either --admin or scoped to --agent ids, not both")
    if not admin and not agent_ids:
        raise InvalidArgument("name at least one --agent the token is scoped to (or --admin)")
    if name is not None and (not name.strip() or len(name) > 200):
        raise InvalidArgument("--name must be 1 to 200 characters")
    token_id = secrets.token_hex(6)
    text = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    row = TokenRow(token_id, hash_token(text), name, agent_ids, admin, system_clock() if now is None else now)
    store.create_token(row)
    return text, row


def revoke_token(store: Store, token_id: str, now: int | None = None) -> bool:
    """True when the token was live and is now revoked; False when it was revoked already."""
    row = store.get_token(token_id)
    if row is None:
        raise NotFound(f"no token {token_id!r} (see 'sessionwatch token list')")
    return store.revoke_token(token_id, system_clock() if now is None else now)


def verify(row: TokenRow | None, token: str) -> Principal | None:
    """The principal of a presented token, given the row its id names (None: refused)."""
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(hash_token(token), row.token_hash):
        return None
    if row.admin:
        return Principal(admin=True, token_id=row.token_id, name=row.name)
    return scoped(row.agents, token_id=row.token_id, name=row.name)
