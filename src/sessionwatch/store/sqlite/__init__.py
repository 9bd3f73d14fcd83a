"""The SQLite backend, one module per role of ``store/base.py``:

- ``connection.py``: the URL, the file, pragmas, migrations, transactions (``SQLiteConnection``);
- ``log.py``: the signal log (``SQLiteLog``), with ``upkeep.py`` keeping the prune's costs flat;
- ``queue.py``: cursors and the notice queue (``SQLiteQueue``), over the queue model in ``queue_model.py``;
- ``sessions.py``, ``links.py``, ``tokens.py``, ``settings.py``: the other roles;
- ``store.py``: ``SQLiteStore``, all of them on one connection.
"""

from __future__ import annotations

from .connection import PRAGMAS, SQLiteConnection, apply_migrations, sqlite_path
from .links import SQLiteLinks
from .log import SQLiteLog
from .queue import SQLiteQueue
from .sessions import SQLiteSessions
from .settings import SQLiteDataSettings
from .store import SQLiteStore
from .tokens import SQLiteTokens

__all__ = [
    "PRAGMAS",
    "SQLiteConnection",
    "SQLiteDataSettings",
    "SQLiteLinks",
    "SQLiteLog",
    "SQLiteQueue",
    "SQLiteSessions",
    "SQLiteStore",
    "SQLiteTokens",
    "apply_migrations",
    "sqlite_path",
]
