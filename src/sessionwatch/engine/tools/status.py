"""session_status: a session's state, and with changesSince the exact delta."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import validation
from ...errors import StoreUnavailable
from ...keys import shown, shown_text
from ...notices import format_timestamp
from ...store.records import EMPTY_PAGE
from ...types import (
    StatusResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    Caller,
    _degraded,
    _flag,
    _scoped,
)


# -- session_status ------------------------------------------------------------------------------
def _status(gw: Engine, args: Mapping[str, Any], caller: Caller) -> StatusResult:
    key = args.get("sessionKey", caller.key)
    if key is None:
        key = caller.key
    skey, agent = _scoped(gw, key, caller, stored=True)
    notes: list[str] = []
    try:  # the session, its stateVersion and its lifecycle in one read
        row, version, state = gw.session_status_row(skey, agent)
    except StoreUnavailable:  # read them apart: a session that cannot be read is an error, a head may degrade
        row = gw.session(skey, agent)
        version = _degraded(notes, "the stateVersion", lambda: gw.state_version(row.session_key, row.agent_id), 0)
        state = _degraded(notes, "the lifecycle", lambda: gw.lifecycle_of(row.session_key, row.agent_id), None)
    since = validation.sequence(args["changesSince"], "changesSince") if args.get("changesSince") is not None else None
    out: dict[str, Any] = {
        "sessionKey": row.session_key,
        "agentId": row.agent_id,
        "sessionId": row.session_id,
        "kind": row.kind,
        "stateVersion": version,
    }
    if row.spawned_by:
        out["spawnedBy"] = row.spawned_by
    if row.active_run_id:
        out["activeRunId"] = row.active_run_id
    if row.goal:
        out["goal"] = row.goal
    if state is not None:
        out["lifecycle"] = state
    lines = [
        f"Session {shown(row.session_key)} (agent {shown(row.agent_id)}, {row.kind})",
        f"sessionId: {row.session_id}",
        f"stateVersion: {version}",
    ]
    if row.spawned_by:
        lines.append(f"spawnedBy: {shown(row.spawned_by)}")
    if row.active_run_id:
        lines.append(f"activeRun: {row.active_run_id}")
    if row.goal:
        lines.append(f"goal: {row.goal.get('objective', '')} [{row.goal.get('status', '')}]")
    if state is not None:
        lines.append(f"lifecycle: {_state_text(state)}")
    if since is not None:
        page = _degraded(
            notes,
            "the state changes",
            lambda: gw.changes_since(row.session_key, since, agent_id=row.agent_id),
            EMPTY_PAGE,
        )
        changes = page.to_json()
        out["stateChanges"] = changes
        if page.events:  # a watcher's read acknowledges what it returned (docs/http.md, "Delivery and reconciling")
            gw.reconcile(caller.key, row.session_key, since, int(page.events[-1]["sequence"]))
        block = json.dumps({"stateVersion": version, "stateChanges": changes}, indent=2, ensure_ascii=False)
        lines += ["", "Session state changes:", "```json", shown_text(block), "```"]
    out["text"] = "\n".join(lines)
    return cast(StatusResult, _flag(out, notes))


def _state_text(state: dict[str, Any]) -> str:
    """``waiting since 2026-...Z`` (``ended (failed) since ...`` for an end with an outcome)."""
    outcome = state.get("outcome")
    name = f"{state['state']} ({outcome})" if outcome and outcome != "ok" else state["state"]
    return f"{name} since {format_timestamp(int(state['since']))}"
