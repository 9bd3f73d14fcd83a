"""Counting dropped recordings: best-effort writes never fail the action, but none is lost unseen.

A recording that the store refused is logged and counted here by cause, and by the agent it was for;
health (``droppedRecordings``) and ``Gateway.dropped_recordings`` show the counts (a token scoped to
agents sees only its agents' counts: other agents' activity is none of its business).
"""

from __future__ import annotations

import threading
from typing import Any

CAUSES = ("read_only", "disk_full", "busy", "unavailable", "in_doubt", "error")
MAX_AGENTS = 10_000  # agents counted one by one; beyond that, new agents' drops count in the totals only


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
        self.by_agent: dict[str, dict[str, int]] = {}  # agent id -> cause -> count
        self.last_error: str | None = None

    def count(self, exc: BaseException, agent_id: str | None = None) -> str:
        cause = classify(exc)
        with self._lock:
            self.total += 1
            self.by_cause[cause] = self.by_cause.get(cause, 0) + 1
            if agent_id is not None and (agent_id in self.by_agent or len(self.by_agent) < MAX_AGENTS):
                mine = self.by_agent.setdefault(agent_id, {})
                mine[cause] = mine.get(cause, 0) + 1
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        return cause

    def to_json(self, agents: frozenset[str] | None = None) -> dict[str, Any]:
        """``{total, byCause}``: of every recording, or only of ``agents``' recordings."""
        with self._lock:
            if agents is None:
                return {"total": self.total, "byCause": dict(self.by_cause)}
            by_cause: dict[str, int] = {}
            for agent in agents:
                for cause, n in self.by_agent.get(agent, {}).items():
                    by_cause[cause] = by_cause.get(cause, 0) + n
            return {"total": sum(by_cause.values()), "byCause": by_cause}
