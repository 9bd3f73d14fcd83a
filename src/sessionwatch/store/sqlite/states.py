"""SQLite: each session's lifecycle state (the ``SessionStates`` role, migration 0009)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ...kinds import LIVE_STATES
from ..base import SessionStates
from ..records import LIFECYCLE_COLS, LifecycleRow, apply_report, lifecycle_from_row
from .connection import SQLiteConnection

_LIVE = ", ".join(f"'{s}'" for s in LIVE_STATES)  # the partial index's own predicate, spelled the same


class SQLiteStates(SQLiteConnection, SessionStates):
    # twin: store/postgres/states.py::PostgresStates.report_lifecycle (bound by
    #   sessionwatch/testing/lifecycle.py::test_lifecycle_machine_matches_the_model)
    def report_lifecycle(self, report: LifecycleRow) -> tuple[LifecycleRow | None, str]:
        with self._tx() as conn:
            found = conn.execute(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key = ? AND agent_id = ?",
                (report.session_key, report.agent_id),
            ).fetchone()
            current = None if found is None else lifecycle_from_row(found)
            row, verdict = apply_report(current, report)
            if row is not None:
                conn.execute(
                    f"INSERT OR REPLACE INTO session_states ({LIFECYCLE_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        row.session_key,
                        row.agent_id,
                        row.state,
                        row.since,
                        row.seen_at,
                        row.pid,
                        row.machine,
                        row.host,
                        row.outcome,
                    ),
                )
            return current, verdict

    def get_lifecycle(self, session_key: str, agent_id: str) -> LifecycleRow | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key = ? AND agent_id = ?",
                (session_key, agent_id),
            ).fetchone()
        return None if row is None else lifecycle_from_row(row)

    def lifecycles(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LifecycleRow]:
        found: dict[tuple[str, str], LifecycleRow] = {}
        keys = sorted({k for k, _ in pairs})
        with self._read() as conn:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                for r in conn.execute(
                    f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ):
                    found[(r[0], r[1])] = lifecycle_from_row(r)
        return {p: found[p] for p in pairs if p in found}

    def lost_candidates(self, cutoff: int, limit: int) -> list[LifecycleRow]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE state IN ({_LIVE}) AND seen_at <= ?"
                " ORDER BY seen_at LIMIT ?",
                (cutoff, limit),
            ).fetchall()
        return [lifecycle_from_row(r) for r in rows]

    # twin: store/postgres/states.py::PostgresStates.mark_lost (bound by
    #   sessionwatch/testing/lifecycle.py::test_silence_while_working_is_lost_once_and_the_parent_is_told_once)
    def mark_lost(self, session_key: str, agent_id: str, cutoff: int, now: int) -> LifecycleRow | None:
        with self._tx() as conn:
            found = conn.execute(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key = ? AND agent_id = ?"
                f" AND state IN ({_LIVE}) AND seen_at <= ?",
                (session_key, agent_id, cutoff),
            ).fetchone()
            if found is None:
                return None
            conn.execute(
                "UPDATE session_states SET state = 'lost', since = ?, outcome = NULL"
                " WHERE session_key = ? AND agent_id = ?",
                (max(now, found[3]), session_key, agent_id),
            )
            return lifecycle_from_row(found)

    def lifecycle_counts(self, agents: Sequence[str] | None = None) -> dict[str, int]:
        sql = "SELECT state, count(*) FROM session_states"
        args: list[str] = []
        if agents is not None:
            sql += " WHERE agent_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(list(agents)))
        with self._lock:
            return dict(self._conn.execute(sql + " GROUP BY state", args))
