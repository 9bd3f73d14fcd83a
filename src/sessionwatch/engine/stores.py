"""What a face needs of the stores, so that no face imports ``sessionwatch.store`` (lint-imports checks it).

The faces (cli/, http/, mcpserver/, hooks/, the clients) open a :class:`~sessionwatch.engine.Gateway`
(``Gateway.open``) or, when a server must open the store before its engine (the gateway answers
readiness while it waits for its database), :func:`open_store` here and then ``Gateway(store)``. The
store-URL helpers are the ones a face decides with before opening anything (does this store exist?), and
the store's type and records are those the faces name in their types. Everything here loads only the
store's interface and records; a backend loads when a store of its kind is opened or its URL taken apart.
"""

from __future__ import annotations

from ..store import open_store
from ..store.base import Store
from ..store.records import PruneResult, TokenRow
from ..store_urls import POSTGRES_SCHEMES, default_sqlite_path

__all__ = [
    "POSTGRES_SCHEMES",
    "PruneResult",
    "Store",
    "TokenRow",
    "default_sqlite_path",
    "is_postgres_url",
    "open_store",
    "postgres_holds_store",
    "sqlite_path",
]


def is_postgres_url(url: str) -> bool:
    """``postgresql://...`` or ``postgres://...``: a PostgreSQL store (anything else names a SQLite file)."""
    return url.startswith(POSTGRES_SCHEMES)


def sqlite_path(url: str) -> str:
    """The file a SQLite store URL (or a plain path) names, ``:memory:`` for an in-memory one;
    ``InvalidArgument`` for ``sqlite://`` with two slashes."""
    from ..store.sqlite.connection import sqlite_path as path_of

    return path_of(url)


def postgres_holds_store(url: str, timeout: float) -> bool:
    """Whether the PostgreSQL database of ``url`` holds a sessionwatch store; nothing is created (a short
    client such as a hook never creates a store). ``StoreUnreachable`` when the server does not answer within
    ``timeout`` (libpq counts whole seconds, and at least 2)."""
    from ..store.postgres.connection import holds_store, split_url

    return holds_store(split_url(url)[0], max(2, int(timeout)))
