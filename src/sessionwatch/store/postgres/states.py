"""PostgreSQL: each session's lifecycle state (the ``SessionStates`` role, migration 0010)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ...kinds import LIVE_STATES
from ..base import SessionStates
from ..records import LIFECYCLE_COLS, LifecycleRow, apply_report, lifecycle_from_row
from .connection import PostgresConnection

T = TypeVar("T")
_SELECT = f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key = %s AND agent_id = %s"


class PostgresStates(PostgresConnection, SessionStates):
    if TYPE_CHECKING:  # provided by PostgresStore

        def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T: ...
        def _once(self, work: Callable[[psycopg.Connection[Any]], T], what: str) -> T: ...
        def _all(self, query: str, params: Any = None) -> list[Any]: ...
        def _durable_read(self) -> str: ...

    # twin: store/sqlite/states.py::SQLiteStates.report_lifecycle (bound by
    #   sessionwatch/testing/lifecycle.py::test_lifecycle_machine_matches_the_model)
    def report_lifecycle(self, report: LifecycleRow) -> tuple[LifecycleRow | None, str]:
        def work(conn: psycopg.Connection[Any]) -> tuple[LifecycleRow | None, str]:
            with conn.transaction():
                # The first report inserts; a report racing it waits on the row, then reads it locked.
                inserted = conn.execute(
                    f"INSERT INTO session_states ({LIFECYCLE_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                    " ON CONFLICT DO NOTHING",
                    _values(report),
                ).rowcount
                if inserted:
                    return None, "new"
                found = conn.execute(_SELECT + " FOR UPDATE", (report.session_key, report.agent_id)).fetchone()
                assert found is not None, "the row that blocked the insert is gone"
                current = lifecycle_from_row(found)
                row, verdict = apply_report(current, report)
                if row is not None:
                    conn.execute(
                        "UPDATE session_states SET state = %s, since = %s, seen_at = %s, pid = %s, machine = %s,"
                        " host = %s, outcome = %s WHERE session_key = %s AND agent_id = %s",
                        (*_values(row)[2:], row.session_key, row.agent_id),
                    )
                return current, verdict

        # Not run twice after a lost connection: a second run would see the change made and record none.
        return self._once(work, f"a lifecycle report of {report.session_key!r}")

    def get_lifecycle(self, session_key: str, agent_id: str) -> LifecycleRow | None:
        rows = self._all(_SELECT, (session_key, agent_id))
        return lifecycle_from_row(rows[0]) if rows else None

    def lifecycles(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LifecycleRow]:
        keys = sorted({k for k, _ in pairs})
        if not keys:
            return {}
        found = {
            (r[0], r[1]): lifecycle_from_row(r)
            for r in self._all(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE session_key = ANY (%s::text[])", (keys,)
            )
        }
        return {p: found[p] for p in pairs if p in found}

    def lost_candidates(self, cutoff: int, limit: int) -> list[LifecycleRow]:
        return [
            lifecycle_from_row(r)
            for r in self._all(
                f"SELECT {LIFECYCLE_COLS} FROM session_states WHERE state = ANY (%s::text[]) AND seen_at <= %s"
                " ORDER BY seen_at LIMIT %s",
                (list(LIVE_STATES), cutoff, limit),
            )
        ]

    # twin: store/sqlite/states.py::SQLiteStates.mark_lost (bound by
    #   sessionwatch/testing/lifecycle.py::test_silence_while_working_is_lost_once_and_the_parent_is_told_once)
    def mark_lost(self, session_key: str, agent_id: str, cutoff: int, now: int) -> LifecycleRow | None:
        def work(conn: psycopg.Connection[Any]) -> LifecycleRow | None:
            with conn.transaction():
                found = conn.execute(
                    _SELECT + " AND state = ANY (%s::text[]) AND seen_at <= %s FOR UPDATE",
                    (session_key, agent_id, list(LIVE_STATES), cutoff),
                ).fetchone()
                if found is None:
                    return None
                conn.execute(
                    "UPDATE session_states SET state = 'lost', since = %s, outcome = NULL"
                    " WHERE session_key = %s AND agent_id = %s",
                    (max(now, found[3]), session_key, agent_id),
                )
                return lifecycle_from_row(found)

        return self._once(work, f"marking {session_key!r} lost")

    def lifecycle_counts(self, agents: Sequence[str] | None = None) -> dict[str, int]:
        if agents is None:
            rows = self._all("SELECT state, count(*) FROM session_states GROUP BY state")
        else:
            rows = self._all(
                "SELECT state, count(*) FROM session_states WHERE agent_id = ANY (%s::text[]) GROUP BY state",
                (list(agents),),
            )
        return {state: int(n) for state, n in rows}


def _values(r: LifecycleRow) -> tuple[Any, ...]:
    return (r.session_key, r.agent_id, r.state, r.since, r.seen_at, r.pid, r.machine, r.host, r.outcome)
