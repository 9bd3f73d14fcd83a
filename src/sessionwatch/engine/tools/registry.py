"""The six tools, each one definition (name, title, description, input schema, handler, hints), and
running one as a caller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import validation
from ...access import check_scope
from ...errors import InvalidArgument, SessionwatchError, StoreUnavailable, UnknownTool
from ...keys import SESSION_KINDS, check_agent_id, parse_key
from ...kinds import LIFECYCLE_STATES
from ...listing import MAX_CURSOR_LENGTH
from ...settings import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    KEY_SCHEMA,
    MAX_SEND_TIMEOUT_S,
    READ_ONLY,
    Caller,
    Hints,
    Tool,
    _obj,
    failure_log,
)
from .history import _history
from .listing import _list
from .send import _send
from .spawn import _spawn
from .status import _status
from .unwatch import _unwatch

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "sessions_spawn",
            "Spawn a child session",
            "Spawn a child session (default key agent:<agentId>:subagent:<label>) and start its run. You watch "
            "it from its spawn version on: you are told once when someone else changes it.",
            _obj(
                {
                    "label": {"type": "string", "maxLength": 200},
                    "sessionKey": KEY_SCHEMA,
                    "agentId": {"type": "string", "maxLength": 200},
                    "task": {"type": "string"},
                    "runId": {"type": "string", "maxLength": 200},
                }
            ),
            _spawn,
            Hints(read_only=False),
            acts_as_caller=True,
        ),
        Tool(
            "sessions_send",
            "Send a message to a session",
            "Send a message into another session as an inter-session turn. watch: true also watches the "
            "target from now on. timeoutSeconds > 0 waits for its reply.",
            _obj(
                {
                    "sessionKey": KEY_SCHEMA,
                    "message": {"type": "string", "minLength": 1},
                    "watch": {"type": "boolean"},
                    "timeoutSeconds": {"type": "number", "minimum": 0, "maximum": MAX_SEND_TIMEOUT_S},
                },
                ["sessionKey", "message"],
            ),
            _send,
            Hints(read_only=False, open_world=True),
            acts_as_caller=True,
        ),
        Tool(
            "session_status",
            "Session status and changes",
            "Status of a session (default: yours) with its stateVersion. Pass changesSince N (the number in a "
            "stale notice) to get the exact typed changes after N; as a watcher of that session you have then seen "
            "them (a notice they cover is withdrawn).",
            _obj(
                {
                    "sessionKey": KEY_SCHEMA,
                    "changesSince": {"type": "integer", "minimum": 0, "maximum": validation.MAX_SEQUENCE},
                }
            ),
            _status,
            READ_ONLY,
        ),
        Tool(
            "sessions_list",
            "List sessions",
            "List sessions with kind, spawn parent, stateVersion (when non-zero) and lifecycle state (when "
            "reported: working, waiting on a person, idle, ended, lost), newest created first. lifecycle "
            "filters by state. When more exist the result has nextCursor: pass it as cursor (with the same "
            "agentId, kinds and lifecycle) for the next page.",
            _obj(
                {
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT},
                    "agentId": {"type": "string", "maxLength": 200},
                    "kinds": {"type": "array", "items": {"type": "string", "enum": list(SESSION_KINDS)}},
                    "lifecycle": {
                        "description": "Only sessions in this lifecycle state, or in one of these states.",
                        "anyOf": [
                            {"type": "string", "enum": list(LIFECYCLE_STATES)},
                            {
                                "type": "array",
                                "items": {"type": "string", "enum": list(LIFECYCLE_STATES)},
                                "minItems": 1,
                            },
                        ],
                    },
                    "cursor": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_CURSOR_LENGTH,
                        "description": "The nextCursor of the previous page (opaque).",
                    },
                }
            ),
            _list,
            READ_ONLY,
        ),
        Tool(
            "sessions_history",
            "Session transcript",
            "Recent messages of a session's transcript (not the signal log).",
            _obj(
                {"sessionKey": KEY_SCHEMA, "limit": {"type": "integer", "minimum": 1, "maximum": 200}}, ["sessionKey"]
            ),
            _history,
            READ_ONLY,
        ),
        Tool(
            "session_unwatch",
            "Stop watching a session",
            "Stop watching a session: drops your cursor and its pending notice, and mutes spawn-parent notices "
            "for it until you watch it again.",
            _obj({"sessionKey": KEY_SCHEMA}, ["sessionKey"]),
            _unwatch,
            Hints(read_only=False, destructive=True, idempotent=True),
            acts_as_caller=True,
        ),
    )
}


def run_tool(
    gw: Engine,
    name: str,
    args: Mapping[str, Any],
    caller: str,
    agent_id: str | None,
    scope: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Run a tool as ``caller``. ``scope`` (a scoped token's agents) limits the caller and every target."""
    try:
        tool = TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            raise UnknownTool(f"unknown tool {name!r}; tools: {', '.join(sorted(TOOLS))}")
        who = parse_key(caller, "caller")
        if who.qualified:
            if agent_id is not None and check_agent_id(agent_id) != who.agent_id:
                raise InvalidArgument(f"agentId {agent_id!r} does not match the caller's agent")
            caller_agent = who.agent_id
        elif agent_id is None:
            raise InvalidArgument("a bare 'global' caller must name its agent (agentId / X-Agent-Id)")
        else:
            caller_agent = check_agent_id(agent_id)
        check_scope(scope, caller_agent, f"caller session {who.raw!r}")
        allowed = set(tool.input_schema["properties"])
        validation.check_args(args, allowed, name)
        for required in tool.input_schema["required"]:
            if args.get(required) is None:
                raise InvalidArgument(f"{name}: missing required argument {required!r}")
        assert caller_agent is not None
        return cast(dict[str, Any], tool.handler(gw, args, Caller(who.raw, caller_agent, who, scope)))
    except SessionwatchError as exc:
        return exc.to_json()
    except Exception as exc:  # noqa: BLE001 - a store failure must not escape as a crash of the caller
        failure_log.exception("tool %s failed", name, per=str(name))
        return StoreUnavailable(f"{name} failed: {exc.__class__.__name__}: {exc}").to_json()
