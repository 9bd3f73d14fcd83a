"""sessions_spawn: a child session, watched by its spawner from its spawn version."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import kinds, validation
from ...access import check_scope
from ...errors import Conflict, InvalidArgument, StoreUnavailable
from ...keys import check_agent_id, parse_key, shown
from ...store.records import EventInput, MessageRow, SessionRow
from ...types import (
    SpawnResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    Caller,
    _caller_must_exist,
    _degraded,
    _flag,
)


# -- sessions_spawn ------------------------------------------------------------------------------
def _spawn(gw: Engine, args: Mapping[str, Any], caller: Caller) -> SpawnResult:
    if args.get("label") is not None and args.get("sessionKey") is not None:
        raise InvalidArgument("sessions_spawn takes label or sessionKey, not both")
    agent = check_agent_id(args["agentId"]) if args.get("agentId") is not None else caller.agent_id
    label = validation.optional_name(args.get("label"), "label")
    task = validation.text(args["task"], "task") if args.get("task") is not None else None
    run_id = validation.name(args["runId"], "runId") if args.get("runId") is not None else uuid.uuid4().hex
    if args.get("sessionKey") is not None:
        child = parse_key(args["sessionKey"], "sessionKey")
        if not child.qualified:
            raise InvalidArgument("a spawned session needs an agent-qualified key")
        if args.get("agentId") is not None and child.agent_id != agent:
            raise InvalidArgument(f"agentId {agent!r} does not match the agent of {child.raw!r}")
        agent = child.agent_id or agent
    else:
        child = parse_key(f"agent:{agent}:subagent:{label or uuid.uuid4().hex[:12]}", "label")
    check_scope(caller.scope, agent, f"child session {child.raw!r}")
    if child.raw == caller.key:
        raise InvalidArgument("a session cannot spawn itself")
    _caller_must_exist(gw, caller)
    existing = gw.store.get_session(child.raw, agent)
    if existing is not None and existing.spawned_by != caller.key:
        raise Conflict(f"session {child.raw!r} exists and was not spawned by {caller.key!r}")
    now = gw.clock()
    if existing is None:
        row, _ = gw.store.put_session(
            SessionRow(child.raw, agent, uuid.uuid4().hex, "subagent", now, now, spawned_by=caller.key, label=label)
        )
        gw.record(
            EventInput(
                child.raw,
                agent,
                kinds.CREATED,
                "agent",
                kinds.CREATED_SUMMARY,
                now,
                actor_id=caller.key,
                session_id=row.session_id,
                dedupe_key=f"created:{agent}:{child.raw}:{row.session_id}",
            )
        )
    else:
        row = existing
    if row.active_run_id != run_id:
        spawned = gw.record(
            EventInput(
                child.raw,
                agent,
                kinds.CHILD_SPAWNED,
                "agent",
                kinds.CHILD_SPAWNED_SUMMARY,
                now,
                actor_id=caller.key,
                session_id=row.session_id,
                run_id=run_id,
                dedupe_key=kinds.child_spawned_key(child.raw, run_id),
                watchers=(caller.key,),
            )
        )
        if spawned is None:
            # The spawn event and the spawner's cursor are what a spawn is, not a side recording: answering
            # success without them would acknowledge a spawn its parent never watches. The run is not marked
            # active yet, so a retry with the same runId records it again (its dedupe key makes that once).
            raise StoreUnavailable(f"the spawn of {child.raw!r} could not be recorded; retry with the same runId")
        # this child's own earlier run (ended since) is a no-op, not a restart of that run (the key names the child)
        repeat = not spawned.inserted and spawned.event is not None
        if not repeat:
            gw.store.update_session(child.raw, agent, now, active_run_id=run_id)
            if task is not None:
                gw.store.append_message(
                    MessageRow(
                        0,
                        child.raw,
                        agent,
                        "user",
                        task,
                        now,
                        provenance="inter_session",
                        source_session_key=caller.key,
                        channel="subagent",
                    )
                )
    notes: list[str] = []
    version = _degraded(notes, "the stateVersion", lambda: gw.state_version(child.raw, agent), 0)
    return cast(
        SpawnResult,
        _flag(
            {
                "sessionKey": child.raw,
                "sessionId": row.session_id,
                "runId": run_id,
                "stateVersion": version,
                "text": f"Spawned {shown(child.raw)} (run {run_id}); stateVersion {version}.",
            },
            notes,
        ),
    )
