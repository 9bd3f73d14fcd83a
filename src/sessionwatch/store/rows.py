"""Column lists and row -> record mapping shared by the SQL backends (same columns, same order)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .records import EventInput, EventRecord, Link, MessageRow, SessionRow, TokenRow, dumps, loads, loads_or_none

EVENT_COLS = (
    "sequence, session_key, agent_id, kind, actor_type, occurred_at, summary, actor_id,"
    " session_id, run_id, dedupe_key, body"
)
CURSOR_COLS = "watcher, target, last_seen, notified, material, provenance, updated_at"
SESSION_COLS = (
    "session_key, agent_id, session_id, kind, spawned_by, label, active_run_id, goal_json, created_at, updated_at"
)
MESSAGE_COLS = "id, session_key, agent_id, role, text, created_at, provenance, source_session_key, channel, imported"
# The sessions_list order (listing.py); migrations 0005 index it for each filter shape.
LIST_ORDER = "created_at DESC, session_key, agent_id"
# Beyond this many (agent, kind) pairs a listing is one filtered walk instead of a merge of walks.
MAX_LIST_BRANCHES = 64
LINK_COLS = (
    "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json,"
    " last_marker_json, created_at, updated_at, last_scanned_at, miss_count, miss_link_updated_at"
)
TOKEN_COLS = "token_id, token_hash, name, agents, admin, created_at, revoked_at"


def cursor_query(watcher: str | None, target: str | None, placeholder: str, extra: str = "") -> tuple[str, list[str]]:
    """The cursors listing, optionally filtered by watcher and/or target, ordered for display. ``extra``:
    one more column after CURSOR_COLS (PostgreSQL's DURABLE_READ)."""
    where, args = [], []
    for column, value in (("watcher", watcher), ("target", target)):
        if value is not None:
            where.append(f"{column} = {placeholder}")
            args.append(value)
    cols = f"{CURSOR_COLS}, {extra}" if extra else CURSOR_COLS
    sql = f"SELECT {cols} FROM cursors" + (" WHERE " + " AND ".join(where) if where else "")
    return sql + " ORDER BY watcher, target", args


def session_with_version_query(placeholder: str, extra: str = "") -> str:
    """One session row (SESSION_COLS) plus its stateVersion, the head's last sequence (0 before its first
    event): session_status in one read. The head comes from a scalar subquery, so SESSION_COLS (whose
    names heads shares) need no qualifying. ``extra``: one more column before the stateVersion (the last
    column either way; PostgreSQL's DURABLE_READ)."""
    return (
        f"SELECT {SESSION_COLS}, {extra + ', ' if extra else ''}coalesce((SELECT h.last_sequence FROM heads h"
        " WHERE h.session_key = s.session_key AND h.agent_id = s.agent_id), 0)"
        f" FROM sessions s WHERE s.session_key = {placeholder} AND s.agent_id = {placeholder}"
    )


def session_status_query(placeholder: str, extra: str = "") -> str:
    """``session_with_version_query`` with the session's lifecycle state, since and outcome (NULLs when
    it never reported one) before the stateVersion: session_status in one read, one round trip."""
    own = "st.session_key = s.session_key AND st.agent_id = s.agent_id"
    lifecycle = ", ".join(f"(SELECT st.{c} FROM session_states st WHERE {own})" for c in ("state", "since", "outcome"))
    return session_with_version_query(placeholder, f"{extra + ', ' if extra else ''}{lifecycle}")


def status_lifecycle(row: Any) -> dict[str, Any] | None:
    """The ``{state, since[, outcome]}`` of a ``session_status_query`` row (its three columns before the
    stateVersion), as ``LifecycleRow.to_json`` shows it."""
    state, since, outcome = row[-4], row[-3], row[-2]
    if state is None:
        return None
    out: dict[str, Any] = {"state": state, "since": since}
    if state == "ended" and outcome is not None:
        out["outcome"] = outcome
    return out


def event_body(ev: EventInput) -> str:
    """The stored JSON body of an event: its public shape without the sequence."""
    body: dict[str, Any] = {
        "kind": ev.kind,
        "actorType": ev.actor_type,
        "occurredAt": ev.occurred_at,
        "summary": ev.summary,
    }
    if ev.actor_id is not None:
        body["actorId"] = ev.actor_id
    if ev.run_id is not None:
        body["runId"] = ev.run_id
    if ev.payload is not None:
        body["payload"] = ev.payload
    return dumps(body)


def event_from_row(row: Sequence[Any]) -> EventRecord:
    return EventRecord(
        sequence=row[0],
        session_key=row[1],
        agent_id=row[2],
        kind=row[3],
        actor_type=row[4],
        occurred_at=row[5],
        summary=row[6],
        actor_id=row[7],
        session_id=row[8],
        run_id=row[9],
        dedupe_key=row[10],
        payload=loads(row[11]).get("payload"),
    )


def session_from_row(row: Sequence[Any]) -> SessionRow:
    return SessionRow(
        session_key=row[0],
        agent_id=row[1],
        session_id=row[2],
        kind=row[3],
        spawned_by=row[4],
        label=row[5],
        active_run_id=row[6],
        goal=loads_or_none(row[7]),
        created_at=row[8],
        updated_at=row[9],
    )


def message_from_row(row: Sequence[Any]) -> MessageRow:
    return MessageRow(
        id=row[0],
        session_key=row[1],
        agent_id=row[2],
        role=row[3],
        text=row[4],
        created_at=row[5],
        provenance=row[6],
        source_session_key=row[7],
        channel=row[8],
        imported=bool(row[9]),
    )


def link_from_row(row: Sequence[Any]) -> Link:
    return Link(
        session_key=row[0],
        agent_id=row[1],
        catalog_id=row[2],
        host_id=row[3],
        thread_id=row[4],
        upstream_kind=row[5],
        upstream_ref=json.loads(row[6]),
        marker=json.loads(row[7]),
        created_at=row[8],
        updated_at=row[9],
        last_scanned_at=row[10],
        miss_count=row[11],
        miss_link_updated_at=row[12],
    )


def token_from_row(row: Any) -> TokenRow:
    return TokenRow(row[0], row[1], row[2], tuple(loads(row[3])), bool(row[4]), row[5], row[6])
