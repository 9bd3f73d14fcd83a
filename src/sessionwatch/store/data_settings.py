"""The stored data settings (migration 0003) and the readiness write probe, for both backends.

Mixins of ``SQLiteStore`` and ``PostgresStore``: the first process that opens a store fills in the
values it was given (or the defaults); from then on every process reads them, and only an explicit
``set_data_settings`` (``sessionwatch settings set``) changes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sqlite_queue import RELINK_ALL


class SQLiteDataSettings:
    _lock: Any
    _conn: Any

    def data_settings(self) -> dict[str, int]:
        with self._lock:
            return {n: int(v) for n, v in self._conn.execute("SELECT name, value FROM data_settings")}

    def init_data_settings(self, values: Mapping[str, int], now: int) -> dict[str, int]:
        """Store the values not stored yet (concurrent openers: the first wins); returns what is stored."""
        with self._tx() as conn:  # type: ignore[attr-defined]
            conn.executemany("INSERT INTO data_settings (name, value, updated_at) VALUES (?, ?, ?)"
                             " ON CONFLICT (name) DO NOTHING", [(n, int(v), now) for n, v in values.items()])
            return {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}

    def set_data_settings(self, changes: Mapping[str, int], now: int) -> tuple[dict[str, int], dict[str, int]]:
        """Change stored values in one transaction; returns (old, new)."""
        with self._tx() as conn:  # type: ignore[attr-defined]
            old = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}
            conn.executemany("INSERT INTO data_settings (name, value, updated_at) VALUES (?, ?, ?)"
                             " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                             " updated_at = excluded.updated_at", [(n, int(v), now) for n, v in changes.items()])
            new = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}
            if "queue_cap" in changes and old.get("queue_cap") != new["queue_cap"]:
                # One full pass, on an explicit settings change only (see sqlite_queue.RELINK_ALL).
                for statement in RELINK_ALL:
                    conn.execute(statement)
        return old, new

    def probe_write(self, now: int) -> None:
        """One small write transaction: raises when the store no longer accepts writes."""
        with self._tx() as conn:  # type: ignore[attr-defined]
            conn.execute("INSERT INTO meta (key, value) VALUES ('health_probe_at', ?)"
                         " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(now),))


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
                new = self._settings_rows(conn)
                if "queue_cap" in changes and old.get("queue_cap") != new["queue_cap"]:
                    # Slot chains for the new cap (migration 0007's backfill, the same statements): a larger cap makes older
                    # appends live again, which a chain cut at an earlier compaction may not reach.
                    conn.execute(
                        "UPDATE cursors c SET queued_prev = l.prev FROM (SELECT x.target, x.watcher, lag(x.target)"
                        " OVER (PARTITION BY x.watcher ORDER BY x.queued_idx) AS prev FROM cursors x"
                        " WHERE x.queued_idx > 0) l WHERE c.target = l.target AND c.watcher = l.watcher"
                        " AND c.queued_prev IS DISTINCT FROM l.prev")
                    conn.execute(
                        "UPDATE queue_heads h SET last_slot = (SELECT c.target FROM cursors c"
                        " WHERE c.watcher = h.session_key AND c.queued_idx > 0 ORDER BY c.queued_idx DESC LIMIT 1)")
                return old, new

        return self._run(work)  # type: ignore[attr-defined,no-any-return]

    def probe_write(self, now: int) -> None:
        self._run(lambda conn: conn.execute(  # type: ignore[attr-defined]
            "INSERT INTO meta (key, value) VALUES ('health_probe_at', %s) ON CONFLICT (key) DO UPDATE"
            " SET value = excluded.value", (str(now),)))
