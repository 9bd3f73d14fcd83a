"""PostgreSQL: the stored data settings (migration 0003) and the readiness write probe (a mixin of
``PostgresStore``; the SQLite twin is ``store/sqlite/settings.py``). The first process that opens a store fills in the
values it was given (or the defaults); from then on every process reads them, and only an explicit
``set_data_settings`` (``sessionwatch settings set``) changes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class PostgresDataSettings:
    def _settings_rows(self, conn: Any) -> dict[str, int]:
        return {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}

    def data_settings(self) -> dict[str, int]:
        return self._run(self._settings_rows)  # type: ignore[attr-defined,no-any-return]

    def init_data_settings(self, values: Mapping[str, int], now: int) -> dict[str, int]:
        def work(conn: Any) -> dict[str, int]:
            with conn.transaction():
                for n, v in values.items():
                    conn.execute("INSERT INTO data_settings (name, value, updated_at) VALUES (%s, %s, %s)"
                                 " ON CONFLICT (name) DO NOTHING", (n, int(v), now))
                return self._settings_rows(conn)

        return self._run(work)  # type: ignore[attr-defined,no-any-return]

    def set_data_settings(self, changes: Mapping[str, int], now: int) -> tuple[dict[str, int], dict[str, int]]:
        def work(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
            with conn.transaction():
                # the row lock of each changed name orders concurrent `settings set` runs
                old = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings FOR UPDATE")}
                for n, v in changes.items():
                    conn.execute("INSERT INTO data_settings (name, value, updated_at) VALUES (%s, %s, %s)"
                                 " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                                 " updated_at = excluded.updated_at", (n, int(v), now))
                return old, self._settings_rows(conn)

        return self._run(work)  # type: ignore[attr-defined,no-any-return]

    def probe_write(self, now: int) -> None:
        self._run(lambda conn: conn.execute(  # type: ignore[attr-defined]
            "INSERT INTO meta (key, value) VALUES ('health_probe_at', %s) ON CONFLICT (key) DO UPDATE"
            " SET value = excluded.value", (str(now),)))
