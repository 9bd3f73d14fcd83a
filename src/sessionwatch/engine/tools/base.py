"""What every tool shares: the caller, the hints, a tool's definition, and the small helpers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...access import check_scope
from ...errors import NotFound, StoreUnavailable
from ...keys import SessionKey
from ...repeats import RepeatedFailures
from ...store.records import SessionRow
from ..schemas import TOOL_RESULTS, result_or_error

if TYPE_CHECKING:
    from ..composed import Engine

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
    handler: Callable[[Engine, Mapping[str, Any], Caller], Mapping[str, Any]]  # returns a sessionwatch.types result
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


def _scoped(gw: Engine, key: object, caller: Caller, *, stored: bool = False) -> tuple[str, str]:
    """Every session a tool reads or writes besides the caller is resolved here, so a scoped token's
    limit holds for all of them. The scope is checked before existence, so a refused token learns
    nothing about other agents' sessions. ``stored``: the session must exist (see ``keys.parse_key``)."""
    skey, agent = gw.resolve(key, caller_agent=caller.agent_id, stored=stored)
    check_scope(caller.scope, agent, f"session {skey!r}")
    return skey, agent


def _target(gw: Engine, key: object, caller: Caller) -> SessionRow:
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


def _caller_must_exist(gw: Engine, caller: Caller) -> None:
    if gw.store.get_session(caller.key, caller.agent_id) is None:
        raise NotFound(f"caller session {caller.key!r} does not exist; create it first (put_session)")
