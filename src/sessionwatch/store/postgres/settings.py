"""PostgreSQL: the data settings stored with the data (migration 0003; the ``DataSettings`` role;
the SQLite twin is ``store/sqlite/settings.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base import DataSettings
from .connection import PostgresConnection


class PostgresDataSettings(PostgresConnection, DataSettings):
    def _settings_rows(self, conn: Any) -> dict[str, int]:
        return {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}

    def data_settings(self) -> dict[str, int]:
        return self._run(self._settings_rows)

    def init_data_settings(self, values: Mapping[str, int], now: int) -> dict[str, int]:
        def work(conn: Any) -> dict[str, int]:
            with conn.transaction():
                for n, v in values.items():
                    conn.execute(
                        "INSERT INTO data_settings (name, value, updated_at) VALUES (%s, %s, %s)"
                        " ON CONFLICT (name) DO NOTHING",
                        (n, int(v), now),
                    )
                return self._settings_rows(conn)

        return self._run(work)

    def set_data_settings(self, changes: Mapping[str, int], now: int) -> tuple[dict[str, int], dict[str, int]]:
        def work(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
            with conn.transaction():
                # the row lock of each changed name orders concurrent `settings set` runs
                old = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings FOR UPDATE")}
                for n, v in changes.items():
                    conn.execute(
                        "INSERT INTO data_settings (name, value, updated_at) VALUES (%s, %s, %s)"
                        " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                        " updated_at = excluded.updated_at",
                        (n, int(v), now),
                    )
                new = self._settings_rows(conn)
                if "queue_cap" in changes and old.get("queue_cap") != new["queue_cap"]:
                    # Slot chains for the new cap (migration 0007's backfill, the same statements): a larger
                    # cap makes older appends live again, which a chain cut at an earlier compaction may not reach.
                    conn.execute(
                        "UPDATE cursors c SET queued_prev = l.prev FROM (SELECT x.target, x.watcher, lag(x.target)"
                        " OVER (PARTITION BY x.watcher ORDER BY x.queued_idx) AS prev FROM cursors x"
                        " WHERE x.queued_idx > 0) l WHERE c.target = l.target AND c.watcher = l.watcher"
                        " AND c.queued_prev IS DISTINCT FROM l.prev"
                    )
                    conn.execute(
                        "UPDATE queue_heads h SET last_slot = (SELECT c.target FROM cursors c"
                        " WHERE c.watcher = h.session_key AND c.queued_idx > 0 ORDER BY c.queued_idx DESC LIMIT 1)"
                    )
                return old, new

        return self._run(work)
