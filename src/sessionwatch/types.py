"""Typed shapes of the tool results and their parts, for annotations in code that uses sessionwatch.

They describe the same JSON the schemas in ``engine.schemas`` publish (a test keeps the two in step):
keys that are always present are required, the others ``NotRequired``.

    from sessionwatch.types import StatusResult

    result = gw.call_tool("session_status", {"changesSince": 4}, caller=key)
    if "error" not in result:
        status: StatusResult = result  # type: ignore[assignment]
"""

# No ``from __future__ import annotations`` here: TypedDict reads NotRequired from evaluated annotations.
from typing import Any, Literal, NotRequired, TypedDict


class QueueEntry(TypedDict):
    """One pending system event (a stale notice, or any enqueued text) of a session."""

    id: int
    text: str
    ts: int
    contextKey: str | None
    line: str  # "System: [<ISO time>] <text>"


class ProjectedEvent(TypedDict):
    sequence: int
    kind: str
    actorType: Literal["human", "agent", "system"]
    occurredAt: int
    summary: str
    actorId: NotRequired[str]
    runId: NotRequired[str]
    payload: NotRequired[dict[str, Any]]


class StateChanges(TypedDict):
    events: list[ProjectedEvent]
    truncated: bool
    earliestAvailableSequence: int
    historyGap: bool


class Message(TypedDict):
    id: int
    role: str
    text: str
    ts: int
    provenance: NotRequired[str]
    sourceSessionKey: NotRequired[str]
    channel: NotRequired[str]
    imported: NotRequired[bool]


class Lifecycle(TypedDict):
    """A session's lifecycle state (absent from results until the session first reported one)."""

    state: Literal["working", "waiting", "idle", "ended", "lost"]
    since: int  # when it entered the state, ms since the epoch
    outcome: NotRequired[str]  # state "ended" only: ok, failed, cancelled, error or timeout


class ListedSession(TypedDict):
    sessionKey: str
    agentId: str
    kind: str
    spawnedBy: NotRequired[str]
    label: NotRequired[str]
    stateVersion: NotRequired[int]
    lifecycle: NotRequired[Lifecycle]


class SpawnResult(TypedDict):
    sessionKey: str
    sessionId: str
    runId: str
    stateVersion: int
    text: str


class SendResult(TypedDict):
    status: Literal["ok", "accepted", "timeout"]
    messageId: int
    text: str
    watched: NotRequired[bool]  # only when watch: true was passed
    reply: NotRequired[str]  # only when status is "ok"


class StatusResult(TypedDict):
    sessionKey: str
    agentId: str
    sessionId: str
    kind: str
    stateVersion: int
    text: str
    spawnedBy: NotRequired[str]
    activeRunId: NotRequired[str]
    goal: NotRequired[dict[str, Any]]
    lifecycle: NotRequired[Lifecycle]
    stateChanges: NotRequired[StateChanges]  # only with changesSince


class ListResult(TypedDict):
    sessions: list[ListedSession]  # newest created first
    text: str
    nextCursor: NotRequired[str]  # only when more sessions follow: the next call's cursor


class HistoryResult(TypedDict):
    sessionKey: str
    messages: list[Message]
    text: str


class UnwatchResult(TypedDict):
    unwatched: bool
    text: str


class ErrorBody(TypedDict):
    code: str
    message: str


class ToolError(TypedDict):
    """What any tool returns instead of its result when it fails (``call_tool`` never raises it)."""

    error: ErrorBody


ToolResult = SpawnResult | SendResult | StatusResult | ListResult | HistoryResult | UnwatchResult | ToolError

# Tool name -> its result type (what a successful call returns).
RESULT_TYPES: dict[str, type] = {
    "sessions_spawn": SpawnResult,
    "sessions_send": SendResult,
    "session_status": StatusResult,
    "sessions_list": ListResult,
    "sessions_history": HistoryResult,
    "session_unwatch": UnwatchResult,
}
