"""SQLite: the data settings stored with the data (migration 0003; the ``DataSettings`` role).

The first process that opens a store fills in the values it was given (or the defaults); from then
on every process reads them, and only an explicit ``set_data_settings`` (``sessionwatch settings set``)
changes them."""

from __future__ import annotations

from collections.abc import Mapping

from ..base import DataSettings
from .connection import SQLiteConnection
from .queue_model import RELINK_ALL


class SQLiteDataSettings(SQLiteConnection, DataSettings):
    def data_settings(self) -> dict[str, int]:
        with self._lock:
            return {n: int(v) for n, v in self._conn.execute("SELECT name, value FROM data_settings")}

    def init_data_settings(self, values: Mapping[str, int], now: int) -> dict[str, int]:
        """Store the values not stored yet (concurrent openers: the first wins); returns what is stored."""
        with self._tx() as conn:
            conn.executemany(
                "INSERT INTO data_settings (name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
                [(n, int(v), now) for n, v in values.items()],
            )
            return {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}

    def set_data_settings(self, changes: Mapping[str, int], now: int) -> tuple[dict[str, int], dict[str, int]]:
        """Change stored values in one transaction; returns (old, new)."""
        with self._tx() as conn:
            old = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}
            conn.executemany(
                "INSERT INTO data_settings (name, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                [(n, int(v), now) for n, v in changes.items()],
            )
            new = {n: int(v) for n, v in conn.execute("SELECT name, value FROM data_settings")}
            if "queue_cap" in changes and old.get("queue_cap") != new["queue_cap"]:
                # One full pass, on an explicit settings change only (see queue_model.RELINK_ALL).
                for statement in RELINK_ALL:
                    conn.execute(statement)
        return old, new
