"""SQLite: the composite store, every role on one connection, plus the lifecycle."""

from __future__ import annotations

from ..base import Store
from .links import SQLiteLinks
from .log import SQLiteLog
from .queue import SQLiteQueue
from .sessions import SQLiteSessions
from .settings import SQLiteDataSettings
from .states import SQLiteStates
from .tokens import SQLiteTokens


class SQLiteStore(
    SQLiteLog, SQLiteQueue, SQLiteSessions, SQLiteLinks, SQLiteTokens, SQLiteDataSettings, SQLiteStates, Store
):
    """The embedded default backend: one file, WAL, one transaction per write, set-based fan-out.
    Thread-safe: one connection behind a lock (connection.py); open and close are ``SQLiteConnection``'s."""

    multi_process = False

    def probe_write(self, now: int) -> None:
        """One small write transaction: raises when the store no longer accepts writes."""
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('health_probe_at', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(now),),
            )
