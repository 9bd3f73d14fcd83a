"""sessions_list: the sessions a caller may see, newest first, paged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import validation
from ...access import check_scope
from ...errors import InvalidArgument
from ...keys import SESSION_KINDS, check_agent_id, shown
from ...kinds import LIFECYCLE_STATES
from ...settings import MAX_LIST_LIMIT
from ...types import (
    Lifecycle,
    ListedSession,
    ListResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    Caller,
    _degraded,
    _flag,
)
from .status import _state_text


# -- sessions_list -------------------------------------------------------------------------------
def _list(gw: Engine, args: Mapping[str, Any], caller: Caller) -> ListResult:
    limit = 50
    if args.get("limit") is not None:
        limit = validation.integer(args["limit"], "limit", minimum=1, maximum=MAX_LIST_LIMIT)
    agent = check_agent_id(args["agentId"]) if args.get("agentId") is not None else None
    wanted_kinds: list[str] | None = None
    if args.get("kinds") is not None:
        wanted_kinds = validation.string_list(args["kinds"], "kinds", SESSION_KINDS)
    wanted_states: list[str] | None = None
    if args.get("lifecycle") is not None:
        raw = args["lifecycle"]
        wanted_states = validation.string_list([raw] if isinstance(raw, str) else raw, "lifecycle", LIFECYCLE_STATES)
        if not wanted_states:
            raise InvalidArgument("lifecycle must name at least one state")
    if agent is not None:
        check_scope(caller.scope, agent, "the sessions")
    cursor = args.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidArgument("cursor must be a string (a nextCursor of sessions_list)")
    page = gw.list_sessions_page(
        agent_id=agent, kinds=wanted_kinds, limit=limit, agents=caller.scope, cursor=cursor, lifecycle=wanted_states
    )
    rows = page.rows
    notes: list[str] = []
    pairs = [(r.session_key, r.agent_id) for r in rows]
    versions = _degraded(
        notes,
        "the stateVersions",
        lambda: gw._host_read(lambda: gw.store.state_versions(pairs), "reading stateVersions"),
        {},
    )
    states = _degraded(
        notes,
        "the lifecycle states",
        lambda: gw._host_read(lambda: gw.store.lifecycles(pairs), "reading lifecycle states") if pairs else {},
        {},
    )
    sessions: list[ListedSession] = []
    lines = []
    for r in rows:
        item: ListedSession = {"sessionKey": r.session_key, "agentId": r.agent_id, "kind": r.kind}
        if r.spawned_by:
            item["spawnedBy"] = r.spawned_by
        if r.label:
            item["label"] = r.label
        version = versions.get((r.session_key, r.agent_id), 0)
        if version:
            item["stateVersion"] = version
        state = states.get((r.session_key, r.agent_id))
        if state is not None:
            item["lifecycle"] = cast(Lifecycle, state.to_json())
        sessions.append(item)
        lines.append(
            f"- {shown(r.session_key)} [{r.kind}]"
            + (f" stateVersion {version}" if version else "")
            + (f" spawnedBy {shown(r.spawned_by)}" if r.spawned_by else "")
            + (f" {_state_text(state.to_json())}" if state is not None else "")
        )
    out: dict[str, Any] = {"sessions": sessions, "text": "\n".join(lines) if lines else "No sessions."}
    if page.next_cursor is not None:
        out["nextCursor"] = page.next_cursor
        out["text"] += (
            f"\n\nMore sessions: call sessions_list again with cursor {page.next_cursor!r} "
            "(and the same agentId, kinds and lifecycle)."
        )
    return cast(ListResult, _flag(out, notes))
