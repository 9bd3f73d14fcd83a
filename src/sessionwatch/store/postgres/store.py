"""PostgreSQL: the composite store, every role on one pool, plus the lifecycle (wakes.py, connection.py)."""

from __future__ import annotations

from ..base import Store
from .links import PostgresLinks
from .log import PostgresLog
from .queue import PostgresQueue
from .sessions import PostgresSessions
from .settings import PostgresDataSettings
from .states import PostgresStates
from .tokens import PostgresTokens
from .wakes import PostgresWakes


class PostgresStore(
    PostgresLog,
    PostgresQueue,
    PostgresSessions,
    PostgresLinks,
    PostgresTokens,
    PostgresDataSettings,
    PostgresStates,
    PostgresWakes,
    Store,
):
    """The scale-out backend. Thread-safe: a connection pool plus one LISTEN connection."""

    multi_process = True

    def probe_write(self, now: int) -> None:
        self._run(
            lambda conn: conn.execute(
                "INSERT INTO meta (key, value) VALUES ('health_probe_at', %s) ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value",
                (str(now),),
            )
        )
