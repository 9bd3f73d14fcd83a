"""PostgreSQL: sessions and their transcripts (the ``Sessions`` role)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ...listing import ListPosition, list_filter
from ..base import Sessions
from ..records import MessageRow, SessionRow, dumps
from ..rows import (
    LIST_ORDER,
    MESSAGE_COLS,
    SESSION_COLS,
    message_from_row,
    session_from_row,
    session_status_query,
    session_with_version_query,
    status_lifecycle,
)
from .connection import PostgresConnection

SESSION_COLS_S = ", ".join(f"s.{c.strip()}" for c in SESSION_COLS.split(","))
LIST_ORDER_S = ", ".join(f"s.{c.strip()}" for c in LIST_ORDER.split(","))
LIST_ORDER_W = ", ".join(f"w.{c.strip()}" for c in LIST_ORDER.split(","))

T = TypeVar("T")


class PostgresSessions(PostgresConnection, Sessions):
    if TYPE_CHECKING:  # provided by PostgresStore

        def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T: ...
        def _one(self, query: str, params: Any = None) -> Any: ...
        def _all(self, query: str, params: Any = None) -> list[Any]: ...
        def _call_one(self, query: str, params: Mapping[str, Any]) -> dict[str, Any] | None: ...
        def _once(self, work: Callable[[psycopg.Connection[Any]], T], what: str) -> T: ...
        def _durable_read(self) -> str: ...

    def put_session(self, row: SessionRow) -> tuple[SessionRow, bool]:
        # One upsert; xmax = 0 tells an insert from an update of an existing row.
        got = self._one(
            f"INSERT INTO sessions ({SESSION_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
            " ON CONFLICT (session_key, agent_id) DO UPDATE SET"
            " kind = coalesce(nullif(excluded.kind, ''), sessions.kind),"
            " spawned_by = coalesce(excluded.spawned_by, sessions.spawned_by),"
            " label = coalesce(excluded.label, sessions.label), updated_at = excluded.updated_at"
            f" RETURNING {SESSION_COLS}, xmax = 0",
            (
                row.session_key,
                row.agent_id,
                row.session_id,
                row.kind,
                row.spawned_by,
                row.label,
                row.active_run_id,
                None if row.goal is None else dumps(row.goal),
                row.created_at,
                row.updated_at,
            ),
        )
        return session_from_row(got[:10]), bool(got[10])

    def get_session(self, session_key: str, agent_id: str) -> SessionRow | None:
        row = self._one(
            f"SELECT {SESSION_COLS} FROM sessions WHERE session_key = %s AND agent_id = %s", (session_key, agent_id)
        )
        return None if row is None else session_from_row(row)

    def get_session_with_version(self, session_key: str, agent_id: str) -> tuple[SessionRow, int] | None:
        row = self._one(session_with_version_query("%s", self._durable_read()), (session_key, agent_id))
        return None if row is None else (session_from_row(row), row[-1])

    def get_session_status(
        self, session_key: str, agent_id: str
    ) -> tuple[SessionRow, int, dict[str, Any] | None] | None:
        row = self._one(session_status_query("%s", self._durable_read()), (session_key, agent_id))
        return None if row is None else (session_from_row(row), row[-1], status_lifecycle(row))

    def list_sessions(
        self,
        agent_id: str | None,
        kinds: Sequence[str] | None,
        limit: int,
        agents: Sequence[str] | None = None,
        after: ListPosition | None = None,
        states: Sequence[str] | None = None,
    ) -> list[SessionRow]:
        flt = list_filter(agent_id, kinds, agents)
        if flt.empty:
            return []
        # A filter on one agent and one kind is an index prefix walked in the listing order. Several
        # agents or kinds: one walk per (agent, kind) pair (LATERAL), each stopping after `limit` rows,
        # merged; so the cost follows the page, not the table. One statement, one round trip either way.
        where: list[str] = []
        args: list[Any] = []
        sources: list[str] = []
        for column, values in (("agent_id", flt.agents), ("kind", flt.kinds)):
            if values is None:
                continue
            if len(values) == 1:
                where.append(f"s.{column} = %s")
                args.append(values[0])
            else:
                sources.append(f"unnest(%s::text[]) AS {column}_f(v)")
                where.append(f"s.{column} = {column}_f.v")
        if after is not None:
            # The first term bounds the index range; the second skips the rows of that millisecond already shown.
            where.append("s.created_at <= %s AND (s.created_at < %s OR (s.session_key, s.agent_id) > (%s, %s))")
            args += [after.created_at, after.created_at, after.session_key, after.agent_id]
        if states is not None:  # a lifecycle filter: checked per row as the walk goes (one key lookup each)
            where.append(
                "EXISTS (SELECT 1 FROM session_states l WHERE l.session_key = s.session_key"
                " AND l.agent_id = s.agent_id AND l.state = ANY (%s::text[]))"
            )
            args.append(list(states))
        walk = (
            f"SELECT {SESSION_COLS_S} FROM sessions s"
            + (" WHERE " + " AND ".join(where) if where else "")
            + f" ORDER BY {LIST_ORDER_S} LIMIT %s"
        )
        if not sources:
            return [session_from_row(r) for r in self._all(walk, [*args, limit])]
        unnested = [list(v) for v in (flt.agents, flt.kinds) if v is not None and len(v) > 1]
        query = (
            f"SELECT w.* FROM {' CROSS JOIN '.join(sources)} CROSS JOIN LATERAL ({walk}) w"
            f" ORDER BY {LIST_ORDER_W} LIMIT %s"
        )
        return [session_from_row(r) for r in self._all(query, [*unnested, *args, limit, limit])]

    _UPDATABLE = {
        "session_id": "session_id",
        "active_run_id": "active_run_id",
        "goal": "goal_json",
        "spawned_by": "spawned_by",
    }

    def update_session(self, session_key: str, agent_id: str, now: int, **fields: Any) -> bool:
        sets: list[str] = ["updated_at = %s"]
        args: list[Any] = [now]
        for name, value in fields.items():
            sets.append(f"{self._UPDATABLE[name]} = %s")
            args.append(dumps(value) if name == "goal" and value is not None else value)
        return self._run(
            lambda c: (
                c.execute(
                    f"UPDATE sessions SET {', '.join(sets)} WHERE session_key = %s AND agent_id = %s",
                    (*args, session_key, agent_id),
                ).rowcount
                > 0
            )
        )

    def end_run(self, session_key: str, agent_id: str, run_id: str, now: int) -> bool:
        return self._run(
            lambda c: (
                c.execute(
                    "UPDATE sessions SET active_run_id = NULL, updated_at = %s WHERE session_key = %s AND agent_id = %s"
                    " AND active_run_id = %s",
                    (now, session_key, agent_id, run_id),
                ).rowcount
                > 0
            )
        )

    # twin: store/sqlite/sessions.py::SQLiteSessions.reset_session (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_reset_drops_the_sessions_own_watches_but_keeps_others_on_it)
    def reset_session(
        self, session_key: str, agent_id: str, new_session_id: str, now: int, context_prefix: str, queue_cap: int = 20
    ) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._writer,))
                found = (
                    conn.execute(
                        "UPDATE sessions SET session_id = %s, active_run_id = NULL, updated_at = %s"
                        " WHERE session_key = %s AND agent_id = %s",
                        (new_session_id, now, session_key, agent_id),
                    ).rowcount
                    > 0
                )
                if found:
                    conn.execute("DELETE FROM cursors WHERE watcher = %s", (session_key,))
                    # ILIKE: SQLite's LIKE ignores ASCII case
                    conn.execute(
                        "DELETE FROM system_events WHERE session_key = %s AND context_key ILIKE %s",
                        (session_key, context_prefix + "%"),
                    )
                    conn.execute(
                        "SELECT * FROM sw_compact(p_session => %(session)s, p_cap => %(cap)s::integer)",
                        {"session": session_key, "cap": queue_cap},
                    )
            return found

        return self._run(work)

    def delete_session(self, session_key: str, agent_id: str, context_key: str, queue_cap: int = 20) -> bool:
        row = self._call_one(
            "SELECT sw_delete_session(p_lock => %(lock)s::bigint, p_key => %(key)s,"
            " p_agent => %(agent)s, p_ctx => %(ctx)s, p_cap => %(cap)s::integer) AS found",
            {"lock": self._writer, "key": session_key, "agent": agent_id, "ctx": context_key, "cap": queue_cap},
        )
        return row is not None and bool(row["found"])  # found: the session row existed

    def append_message(self, msg: MessageRow) -> MessageRow:
        # Not run twice after a lost connection: that could store the message twice (in doubt instead).
        row = self._once(
            lambda c: c.execute(
                "INSERT INTO messages (session_key, agent_id, role, text, provenance, source_session_key, channel,"
                " imported, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (
                    msg.session_key,
                    msg.agent_id,
                    msg.role,
                    msg.text,
                    msg.provenance,
                    msg.source_session_key,
                    msg.channel,
                    bool(msg.imported),
                    msg.created_at,
                ),
            ).fetchone(),
            f"storing a message of {msg.session_key!r}",
        )
        assert row is not None  # INSERT ... RETURNING: one row
        msg.id = row[0]
        return msg

    def messages(
        self, session_key: str, agent_id: str, limit: int, after_id: int = 0, role: str | None = None
    ) -> list[MessageRow]:
        query = (
            f"SELECT {MESSAGE_COLS} FROM messages WHERE session_key = %s AND agent_id = %s AND id > %s"
            + (" AND role = %s" if role else "")
            + " ORDER BY id DESC LIMIT %s"
        )
        args: list[Any] = [session_key, agent_id, after_id] + ([role] if role else []) + [limit]
        return [message_from_row(r) for r in reversed(self._all(query, args))]

    def own_user_texts(self, session_key: str, agent_id: str, limit: int) -> list[str]:
        return [
            r[0]
            for r in self._all(
                "SELECT text FROM messages WHERE session_key = %s AND agent_id = %s AND role = 'user'"
                " AND NOT imported ORDER BY id DESC LIMIT %s",
                (session_key, agent_id, limit),
            )
        ]
