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
                return old, self._settings_rows(conn)

        return self._run(work)
