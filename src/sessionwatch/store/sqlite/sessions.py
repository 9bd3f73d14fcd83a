"""SQLite: sessions and their transcripts (the ``Sessions`` role)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import product
from typing import Any

from ...listing import ListPosition, list_filter
from ..base import Sessions
from ..records import MessageRow, SessionRow, dumps
from ..rows import (
    LIST_ORDER,
    MAX_LIST_BRANCHES,
    MESSAGE_COLS,
    SESSION_COLS,
    message_from_row,
    session_from_row,
    session_status_query,
    session_with_version_query,
    status_lifecycle,
)
from . import queue_model, upkeep
from .connection import SQLiteConnection


class SQLiteSessions(SQLiteConnection, Sessions):
    def put_session(self, row: SessionRow) -> tuple[SessionRow, bool]:
        with self._tx() as conn:
            existing = conn.execute(
                f"SELECT {SESSION_COLS} FROM sessions WHERE session_key = ? AND agent_id = ?",
                (row.session_key, row.agent_id),
            ).fetchone()
            if existing is None:
                conn.execute(
                    f"INSERT INTO sessions ({SESSION_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
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
                return row, True
            current = session_from_row(existing)
            current.kind = row.kind or current.kind
            current.spawned_by = row.spawned_by if row.spawned_by is not None else current.spawned_by
            current.label = row.label if row.label is not None else current.label
            current.updated_at = row.updated_at
            conn.execute(
                "UPDATE sessions SET kind = ?, spawned_by = ?, label = ?, updated_at = ?"
                " WHERE session_key = ? AND agent_id = ?",
                (current.kind, current.spawned_by, current.label, current.updated_at, row.session_key, row.agent_id),
            )
            return current, False

    def get_session(self, session_key: str, agent_id: str) -> SessionRow | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {SESSION_COLS} FROM sessions WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)
            ).fetchone()
        return None if row is None else session_from_row(row)

    def get_session_with_version(self, session_key: str, agent_id: str) -> tuple[SessionRow, int] | None:
        with self._lock:
            row = self._conn.execute(session_with_version_query("?"), (session_key, agent_id)).fetchone()
        return None if row is None else (session_from_row(row), row[-1])

    def get_session_status(
        self, session_key: str, agent_id: str
    ) -> tuple[SessionRow, int, dict[str, Any] | None] | None:
        with self._lock:
            row = self._conn.execute(session_status_query("?"), (session_key, agent_id)).fetchone()
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
        # One ordered index walk per (agent, kind) pair of the filter, each stopping after `limit` rows;
        # several walks are merged by a UNION ALL of at most len(agents) x len(kinds) x limit rows, so the
        # cost follows the page, not the table. Past MAX_LIST_BRANCHES pairs one filtered walk is used.
        pairs = list(product(flt.agents or (None,), flt.kinds or (None,)))
        if len(pairs) > MAX_LIST_BRANCHES:
            sql, args = self._list_walk(flt.agents, flt.kinds, after, limit, states)
        elif len(pairs) == 1:
            agent, kind = pairs[0]
            sql, args = self._list_walk(
                None if agent is None else (agent,), None if kind is None else (kind,), after, limit, states
            )
        else:
            parts, args = [], []
            for agent, kind in pairs:
                part, part_args = self._list_walk(
                    None if agent is None else (agent,), None if kind is None else (kind,), after, limit, states
                )
                parts.append(f"SELECT * FROM ({part})")
                args += part_args
            sql = " UNION ALL ".join(parts) + f" ORDER BY {LIST_ORDER} LIMIT ?"
            args.append(limit)
        with self._lock:
            return [session_from_row(r) for r in self._conn.execute(sql, args)]

    @staticmethod
    def _list_walk(
        agents: Sequence[str] | None,
        kinds: Sequence[str] | None,
        after: ListPosition | None,
        limit: int,
        states: Sequence[str] | None = None,
    ) -> tuple[str, list[Any]]:
        """One walk of the listing order from ``after`` on; one agent and one kind use an index prefix."""
        where: list[str] = []
        args: list[Any] = []
        for column, values in (("agent_id", agents), ("kind", kinds)):
            if values is None:
                continue
            if len(values) == 1:
                where.append(f"{column} = ?")
                args.append(values[0])
            else:
                where.append(f"{column} IN (SELECT value FROM json_each(?))")
                args.append(json.dumps(list(values)))
        if after is not None:
            # The first term bounds the index range; the second skips the rows of that millisecond already shown.
            where.append("created_at <= ? AND (created_at < ? OR (session_key, agent_id) > (?, ?))")
            args += [after.created_at, after.created_at, after.session_key, after.agent_id]
        if states is not None:  # a lifecycle filter: checked per row as the walk goes (one key lookup each)
            where.append(
                "EXISTS (SELECT 1 FROM session_states l WHERE l.session_key = sessions.session_key"
                " AND l.agent_id = sessions.agent_id AND l.state IN (SELECT value FROM json_each(?)))"
            )
            args.append(json.dumps(list(states)))
        sql = f"SELECT {SESSION_COLS} FROM sessions" + (" WHERE " + " AND ".join(where) if where else "")
        return sql + f" ORDER BY {LIST_ORDER} LIMIT ?", [*args, limit]

    _UPDATABLE = {
        "session_id": "session_id",
        "active_run_id": "active_run_id",
        "goal": "goal_json",
        "spawned_by": "spawned_by",
    }

    def update_session(self, session_key: str, agent_id: str, now: int, **fields: Any) -> bool:
        sets: list[str] = ["updated_at = ?"]
        args: list[Any] = [now]
        for name, value in fields.items():
            sets.append(f"{self._UPDATABLE[name]} = ?")
            args.append(dumps(value) if name == "goal" and value is not None else value)
        with self._tx() as conn:
            return (
                conn.execute(
                    f"UPDATE sessions SET {', '.join(sets)} WHERE session_key = ? AND agent_id = ?",
                    (*args, session_key, agent_id),
                ).rowcount
                > 0
            )

    def end_run(self, session_key: str, agent_id: str, run_id: str, now: int) -> bool:
        with self._tx() as conn:
            return (
                conn.execute(
                    "UPDATE sessions SET active_run_id = NULL, updated_at = ? WHERE session_key = ?"
                    " AND agent_id = ? AND active_run_id = ?",
                    (now, session_key, agent_id, run_id),
                ).rowcount
                > 0
            )

    # twin: store/postgres/sessions.py::PostgresSessions.reset_session (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_reset_drops_the_sessions_own_watches_but_keeps_others_on_it)
    def reset_session(
        self, session_key: str, agent_id: str, new_session_id: str, now: int, context_prefix: str, queue_cap: int = 20
    ) -> bool:
        with self._tx() as conn:
            found = (
                conn.execute(
                    "UPDATE sessions SET session_id = ?, active_run_id = NULL, updated_at = ?"
                    " WHERE session_key = ? AND agent_id = ?",
                    (new_session_id, now, session_key, agent_id),
                ).rowcount
                > 0
            )
            if found:
                conn.execute("DELETE FROM cursors WHERE watcher = ?", (session_key,))
                conn.execute(
                    "DELETE FROM system_events WHERE session_key = ? AND context_key LIKE ?",
                    (session_key, context_prefix + "%"),
                )
                queue_model.after_removal(conn, {session_key}, queue_cap)
            return found

    # twin: store/postgres_functions.sql::sw_delete_session (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/watchers.py::test_delete_removes_events_head_and_cursors_both_ways)
    def delete_session(self, session_key: str, agent_id: str, context_key: str, queue_cap: int = 20) -> bool:
        with self._tx() as conn:
            found = (
                conn.execute(
                    "DELETE FROM sessions WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)
                ).rowcount
                > 0
            )
            conn.execute("DELETE FROM upstream_links WHERE session_key = ? AND agent_id = ?", (session_key, agent_id))
            upkeep.forget_rows(
                conn,
                [
                    s
                    for (s,) in conn.execute(
                        "DELETE FROM events WHERE session_key = ? AND agent_id = ? RETURNING sequence",
                        (session_key, agent_id),
                    )
                ],
            )
            conn.execute("DELETE FROM heads WHERE session_key = ? AND agent_id = ?", (session_key, agent_id))
            conn.execute("DELETE FROM session_states WHERE session_key = ? AND agent_id = ?", (session_key, agent_id))
            conn.execute("DELETE FROM messages WHERE session_key = ? AND agent_id = ?", (session_key, agent_id))
            touched = {
                w for (w,) in conn.execute("DELETE FROM cursors WHERE target = ? RETURNING watcher", (session_key,))
            }
            touched |= {
                w
                for (w,) in conn.execute(
                    "DELETE FROM system_events WHERE context_key = ? RETURNING session_key", (context_key,)
                )
            }
            conn.execute("DELETE FROM cursors WHERE watcher = ?", (session_key,))
            conn.execute("DELETE FROM watch_mutes WHERE watcher = ?1 OR target = ?1", (session_key,))
            conn.execute("DELETE FROM system_events WHERE session_key = ?", (session_key,))
            # The head stays (emptied): its append counter keeps entry ids unique if the key comes back.
            conn.execute("UPDATE queue_heads SET drained = appended WHERE session_key = ?", (session_key,))
            touched.discard(session_key)
            queue_model.after_removal(conn, touched, queue_cap)
            return found

    def append_message(self, msg: MessageRow) -> MessageRow:
        with self._tx() as conn:
            row = conn.execute(
                "INSERT INTO messages (session_key, agent_id, role, text, provenance, source_session_key, channel,"
                " imported, created_at) VALUES (?,?,?,?,?,?,?,?,?) RETURNING id",
                (
                    msg.session_key,
                    msg.agent_id,
                    msg.role,
                    msg.text,
                    msg.provenance,
                    msg.source_session_key,
                    msg.channel,
                    int(msg.imported),
                    msg.created_at,
                ),
            ).fetchone()
        msg.id = row[0]
        return msg

    def messages(
        self, session_key: str, agent_id: str, limit: int, after_id: int = 0, role: str | None = None
    ) -> list[MessageRow]:
        sql = (
            f"SELECT {MESSAGE_COLS} FROM messages WHERE session_key = ? AND agent_id = ? AND id > ?"
            + (" AND role = ?" if role else "")
            + " ORDER BY id DESC LIMIT ?"
        )
        args: list[Any] = [session_key, agent_id, after_id] + ([role] if role else []) + [limit]
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [message_from_row(r) for r in reversed(rows)]

    def own_user_texts(self, session_key: str, agent_id: str, limit: int) -> list[str]:
        with self._lock:
            return [
                r[0]
                for r in self._conn.execute(
                    "SELECT text FROM messages WHERE session_key = ? AND agent_id = ? AND role = 'user'"
                    " AND imported = 0 ORDER BY id DESC LIMIT ?",
                    (session_key, agent_id, limit),
                )
            ]
