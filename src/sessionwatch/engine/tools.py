"""The tool layer: one definition per tool (schema, description, handler), shared by every face."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .. import kinds, validation
from ..access import check_scope
from ..errors import Conflict, InvalidArgument, NotFound, SessionwatchError, StoreUnavailable, UnknownTool
from ..keys import SESSION_KINDS, SessionKey, check_agent_id, parse_key, shown, shown_text
from ..kinds import LIFECYCLE_STATES
from ..listing import MAX_CURSOR_LENGTH
from ..notices import format_timestamp
from ..repeats import RepeatedFailures
from ..settings import MAX_LIST_LIMIT
from ..store.records import EMPTY_PAGE, EventInput, MessageRow, SessionRow
from ..types import (
    HistoryResult,
    Lifecycle,
    ListedSession,
    ListResult,
    SendResult,
    SpawnResult,
    StatusResult,
    UnwatchResult,
)
from .schemas import TOOL_RESULTS, result_or_error

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("sessionwatch.tools")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

MAX_SEND_TIMEOUT_S = 600
BODY_LINE = "  | "  # how each further line of a message body starts in a tool's text (docs/security.md)


def frame_message(role: str, body: str) -> str:
    """A transcript message as lines of a tool's text: ``[role] `` and the body's first line, then every
    further line of the body after ``BODY_LINE``. The body is split wherever any reader may see a line
    break (``str.splitlines``: also CR, U+2028, U+2029, NEL, VT, FF), so no line of a body starts a line
    of the text: a body line ``System: ...`` can never pass for one of the queue's ``System:`` lines."""
    first, *rest = body.splitlines() or [""]
    return "\n".join([f"[{role}] {first}", *(BODY_LINE + line for line in rest)])


@dataclass(frozen=True)
class Caller:
    key: str
    agent_id: str
    parsed: SessionKey
    scope: frozenset[str] | None = None  # the agents a scoped token covers (None: unrestricted)

    @property
    def qualified(self) -> bool:
        return self.parsed.qualified


@dataclass(frozen=True)
class Hints:
    """How a tool touches the world, for hosts deciding what to auto-approve (MCP tool annotations).

    The reasoning per tool is written down in docs/mcp.md ("Tool annotations").
    """

    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def to_json(self) -> dict[str, bool]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


READ_ONLY = Hints(read_only=True, idempotent=True)


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: Callable[[Gateway, Mapping[str, Any], Caller], Mapping[str, Any]]  # returns a sessionwatch.types result
    hints: Hints
    acts_as_caller: bool = False

    @property
    def result_schema(self) -> dict[str, Any]:
        """The JSON Schema of a successful result (HTTP 200 body, MCP structured content)."""
        return TOOL_RESULTS[self.name]

    @property
    def output_schema(self) -> dict[str, Any]:
        """What ``Gateway.call_tool`` returns for this tool: the result or the error object."""
        return result_or_error(self.result_schema)


KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 512,
    "description": "A session key: 'agent:<agentId>:<rest>' or the bare 'global'.",
}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or [], "additionalProperties": False}


def _scoped(gw: Gateway, key: object, caller: Caller, *, stored: bool = False) -> tuple[str, str]:
    """Every session a tool reads or writes besides the caller is resolved here, so a scoped token's
    limit holds for all of them. The scope is checked before existence, so a refused token learns
    nothing about other agents' sessions. ``stored``: the session must exist (see ``keys.parse_key``)."""
    skey, agent = gw.resolve(key, caller_agent=caller.agent_id, stored=stored)
    check_scope(caller.scope, agent, f"session {skey!r}")
    return skey, agent


def _target(gw: Gateway, key: object, caller: Caller) -> SessionRow:
    """The existing session a tool names, through ``_scoped``."""
    return gw.session(*_scoped(gw, key, caller, stored=True))


def _degraded(notes: list[str], what: str, fn: Callable[[], Any], default: Any) -> Any:
    """Where the spec lets a failed read degrade (the tool must not fail), note it for ``_flag``."""
    try:
        return fn()
    except (StoreUnavailable, OSError) as exc:
        failure_log.warning("%s failed; the tool result says it is degraded: %s", what, exc, per=what)
        notes.append(what)
        return default


def _flag(out: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``degraded: true`` plus a sentence, so an empty read is never mistaken for "no changes"."""
    if notes:
        out["degraded"] = True
        out["text"] = (
            f"{out.get('text', '')}\n\nDegraded: reading {' and '.join(notes)} failed, so the "
            'values shown for it are empty or 0 and do not mean "no changes". Retry shortly.'
        ).lstrip()
    return out


def _caller_must_exist(gw: Gateway, caller: Caller) -> None:
    if gw.store.get_session(caller.key, caller.agent_id) is None:
        raise NotFound(f"caller session {caller.key!r} does not exist; create it first (put_session)")


# -- sessions_spawn ------------------------------------------------------------------------------
def _spawn(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> SpawnResult:
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
        # this child's own earlier run (ended since) is a no-op, not a restart of that run (the key names the child)
        repeat = spawned is not None and not spawned.inserted and spawned.event is not None
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


# -- sessions_send -------------------------------------------------------------------------------
def _send(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> SendResult:
    target = _target(gw, args.get("sessionKey"), caller)
    message = validation.text(args.get("message"), "message")
    watch = validation.boolean(args["watch"], "watch") if "watch" in args else None
    timeout = 0.0
    if args.get("timeoutSeconds") is not None:
        timeout = validation.number(args["timeoutSeconds"], "timeoutSeconds", maximum=MAX_SEND_TIMEOUT_S)
    _caller_must_exist(gw, caller)
    msg = gw.store.append_message(
        MessageRow(
            0,
            target.session_key,
            target.agent_id,
            "user",
            message,
            gw.clock(),
            provenance="inter_session",
            source_session_key=caller.key,
        )
    )
    gw._notify_messages()
    out: dict[str, Any] = {"status": "accepted", "messageId": msg.id}
    if watch is True:
        out["watched"] = (
            caller.qualified
            and caller.key != target.session_key
            and gw._register(caller.key, target.session_key, target.agent_id, "explicit")
        )
    if timeout > 0:
        reply = gw.wait_for_reply(target.session_key, target.agent_id, msg.id, timeout)
        if reply is None:
            out["status"] = "timeout"
        else:
            out["status"] = "ok"
            out["reply"] = reply.text
    watched = "" if "watched" not in out else (" Watching it now." if out["watched"] else " Not watched.")
    name = shown(target.session_key)
    if out["status"] == "ok":
        out["text"] = f"Reply from {name}:\n{frame_message('assistant', out['reply'])}"
    elif out["status"] == "timeout":
        out["text"] = f"Delivered to {name}; no reply within {timeout:g} s.{watched}"
    else:
        out["text"] = f"Delivered to {name} (message {msg.id}).{watched}"
    return cast(SendResult, out)


# -- session_status ------------------------------------------------------------------------------
def _status(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> StatusResult:
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
        if page.events:  # a watcher's read acknowledges what it returned (SPEC §2 "reconciling")
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


# -- sessions_list -------------------------------------------------------------------------------
def _list(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> ListResult:
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


# -- sessions_history ----------------------------------------------------------------------------
def _history(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> HistoryResult:
    row = _target(gw, args.get("sessionKey"), caller)
    limit = validation.integer(args["limit"], "limit", minimum=1, maximum=200) if args.get("limit") is not None else 20
    notes: list[str] = []
    msgs = _degraded(
        notes,
        "the transcript",
        lambda: gw._host_read(
            lambda: gw.store.messages(row.session_key, row.agent_id, limit), "reading the transcript"
        ),
        [],
    )
    lines = [frame_message(m.role, m.text) for m in msgs]
    return cast(
        HistoryResult,
        _flag(
            {
                "sessionKey": row.session_key,
                "messages": [m.to_json() for m in msgs],
                "text": "\n".join(lines) if lines else f"No messages in {shown(row.session_key)}.",
            },
            notes,
        ),
    )


# -- session_unwatch -----------------------------------------------------------------------------
def _unwatch(gw: Gateway, args: Mapping[str, Any], caller: Caller) -> UnwatchResult:
    # an unknown target or caller is bad input: refuse it before writing a mute row
    target = _target(gw, args.get("sessionKey"), caller).session_key
    if not caller.qualified:
        return {"unwatched": False, "text": "A bare 'global' session holds no watches."}
    _caller_must_exist(gw, caller)
    done = gw._unwatch(caller.key, target)  # both checked: the caller parsed, the target found
    return {
        "unwatched": done,
        "text": f"Stopped watching {shown(target)}."
        if done
        else f"{shown(caller.key)} was not watching {shown(target)}; muted.",
    }


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
    gw: Gateway,
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
