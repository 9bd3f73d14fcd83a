"""The PostgreSQL backend, one module per role of ``store/base.py``:

- ``connection.py``: the URL, the pool, migrations and the functions file, locks (``PostgresConnection``);
- ``log.py``: the signal log (``PostgresLog``);
- ``queue.py``: cursors and the notice queue (``PostgresQueue``);
- ``sessions.py``, ``links.py``, ``tokens.py``, ``settings.py``: the other roles;
- ``wakes.py``: wakes across processes (LISTEN/NOTIFY and the poll) and the single-runner lock;
- ``store.py``: ``PostgresStore``, all of them on one pool.

The hot write paths are plpgsql functions (``store/postgres_functions.sql``) called in one round trip.
"""

from __future__ import annotations

from .connection import (
    PostgresConnection,
    _migration_files,
    apply_migrations,
    functions_sql,
    lock_key,
    named_call,
    split_url,
    wake_channel,
)
from .links import PostgresLinks
from .log import PostgresLog
from .queue import PostgresQueue
from .sessions import PostgresSessions
from .settings import PostgresDataSettings
from .store import PostgresStore
from .tokens import PostgresTokens
from .wakes import PostgresWakes

__all__ = [
    "PostgresConnection",
    "PostgresDataSettings",
    "PostgresLinks",
    "PostgresLog",
    "PostgresQueue",
    "PostgresSessions",
    "PostgresStore",
    "PostgresTokens",
    "PostgresWakes",
    "_migration_files",
    "apply_migrations",
    "functions_sql",
    "lock_key",
    "named_call",
    "split_url",
    "wake_channel",
]
