"""Counting dropped recordings: best-effort writes never fail the action, but none is lost unseen.

A recording that the store refused is logged and counted here by cause; health (``droppedRecordings``)
and ``Gateway.dropped_recordings`` show the counts.
"""

from __future__ import annotations

import threading
from typing import Any

CAUSES = ("read_only", "disk_full", "busy", "unavailable", "in_doubt", "error")


def classify(exc: BaseException) -> str:
    """A short, stable cause for a failed write (SQLite and PostgreSQL messages and classes)."""
    name = type(exc).__name__
    if name == "StoreInDoubt":  # the store could not tell whether it was written (the caller is told so)
        return "in_doubt"
    text = f"{name} {exc}".lower()
    if "readonly" in text or "read-only" in text or "read only" in text or name == "ReadOnlySqlTransaction":
        return "read_only"
    if "disk is full" in text or "no space" in text or name == "DiskFull" or "disk full" in text:
        return "disk_full"
    if "locked" in text or "busy" in text or name in ("LockNotAvailable", "QueryCanceled"):
        return "busy"
    if name in ("OperationalError", "PoolTimeout", "ConnectionTimeout", "InterfaceError") or "connection" in text:
        return "unavailable"
    return "error"


class DropCounter:
    """Thread-safe counts of dropped recordings, by cause."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.by_cause: dict[str, int] = {}
        self.last_error: str | None = None

    def count(self, exc: BaseException) -> str:
        cause = classify(exc)
        with self._lock:
            self.total += 1
            self.by_cause[cause] = self.by_cause.get(cause, 0) + 1
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        return cause

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"total": self.total, "byCause": dict(self.by_cause)}
