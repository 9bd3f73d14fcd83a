"""JSON Schemas of what the engine returns: tool results, the error object and their building blocks.

Every face publishes these same dicts: HTTP in its OpenAPI document, MCP as each tool's ``outputSchema``.
They are self-contained (no ``$ref``), because an MCP client resolves references only inside the one
schema it was given. Result objects list their typed fields and allow further ones, so adding a field
later never breaks a validating client.
"""

from __future__ import annotations

from typing import Any

from ..keys import SESSION_KINDS
from ..kinds import END_OUTCOMES, LIFECYCLE_STATES

Schema = dict[str, Any]

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
BOOL: Schema = {"type": "boolean"}
ANY_OBJECT: Schema = {"type": "object"}

ERROR_CODES = (
    "invalid_argument",
    "not_found",
    "unknown_tool",
    "forbidden",
    "unauthorized",
    "payload_too_large",
    "conflict",
    "unavailable",
    "method_not_allowed",
    "internal",
)


def obj(props: dict[str, Schema], required: list[str] | None = None) -> Schema:
    """A result object: the listed fields are typed, further fields are allowed (forward compatible)."""
    return {"type": "object", "properties": props, "required": required or []}


ERROR: Schema = obj(
    {
        "error": obj(
            # retryAfter: seconds, on transient failures (code unavailable); the HTTP Retry-After header too
            {"code": {"type": "string", "enum": list(ERROR_CODES)}, "message": STR, "retryAfter": INT},
            ["code", "message"],
        )
    },
    ["error"],
)

EVENT_PROPS: dict[str, Schema] = {
    "sequence": INT,
    "kind": STR,
    "actorType": {"type": "string", "enum": ["human", "agent", "system"]},
    "occurredAt": INT,
    "summary": STR,
    "actorId": STR,
    "runId": STR,
    "payload": ANY_OBJECT,
}
PROJECTED_EVENT: Schema = obj(EVENT_PROPS, ["sequence", "kind", "actorType", "occurredAt", "summary"])
STATE_CHANGES: Schema = obj(
    {
        "events": {"type": "array", "items": PROJECTED_EVENT},
        "truncated": BOOL,
        "earliestAvailableSequence": INT,
        "historyGap": BOOL,
    },
    ["events", "truncated", "earliestAvailableSequence", "historyGap"],
)
MESSAGE: Schema = obj(
    {
        "id": INT,
        "role": STR,
        "text": STR,
        "ts": INT,
        "provenance": STR,
        "sourceSessionKey": STR,
        "channel": STR,
        "imported": BOOL,
    },
    ["id", "role", "text", "ts"],
)
QUEUE_ENTRY: Schema = obj(
    {
        "id": {
            "type": "integer",
            "description": "Stable: the same entry has the same id in every peek and process, never reused.",
        },
        "text": STR,
        "ts": INT,
        "contextKey": {"type": ["string", "null"]},
        "line": STR,
    },
    ["id", "text", "ts", "contextKey", "line"],
)
LIFECYCLE: Schema = obj(
    {
        "state": {"type": "string", "enum": list(LIFECYCLE_STATES)},
        "since": {"type": "integer", "description": "When the session entered this state (ms since the epoch)."},
        "outcome": {"type": "string", "enum": list(END_OUTCOMES), "description": "How it ended (state ended only)."},
    },
    ["state", "since"],
)
LISTED_SESSION: Schema = obj(
    {
        "sessionKey": STR,
        "agentId": STR,
        "kind": {"type": "string", "enum": list(SESSION_KINDS)},
        "spawnedBy": STR,
        "label": STR,
        "stateVersion": INT,
        "lifecycle": LIFECYCLE,
    },
    ["sessionKey", "agentId", "kind"],
)

# What each tool returns on success (the ``text`` field, a ready-to-read rendering, is always there).
TOOL_RESULTS: dict[str, Schema] = {
    "sessions_spawn": obj(
        {"sessionKey": STR, "sessionId": STR, "runId": STR, "stateVersion": INT, "text": STR},
        ["sessionKey", "sessionId", "runId", "stateVersion", "text"],
    ),
    "sessions_send": obj(
        {
            "status": {"type": "string", "enum": ["ok", "accepted", "timeout"]},
            "messageId": INT,
            "watched": BOOL,
            "reply": STR,
            "text": STR,
        },
        ["status", "messageId", "text"],
    ),
    "session_status": obj(
        {
            "sessionKey": STR,
            "agentId": STR,
            "sessionId": STR,
            "kind": {"type": "string", "enum": list(SESSION_KINDS)},
            "stateVersion": INT,
            "spawnedBy": STR,
            "activeRunId": STR,
            "goal": ANY_OBJECT,
            "lifecycle": LIFECYCLE,
            "stateChanges": STATE_CHANGES,
            "text": STR,
        },
        ["sessionKey", "agentId", "sessionId", "kind", "stateVersion", "text"],
    ),
    "sessions_list": obj(
        {
            "sessions": {"type": "array", "items": LISTED_SESSION},
            "nextCursor": {
                "type": "string",
                "description": "Present when more sessions follow: "
                "pass it as cursor, with the same agentId, kinds and lifecycle, for the next page.",
            },
            "text": STR,
        },
        ["sessions", "text"],
    ),
    "sessions_history": obj(
        {"sessionKey": STR, "messages": {"type": "array", "items": MESSAGE}, "text": STR},
        ["sessionKey", "messages", "text"],
    ),
    "session_unwatch": obj({"unwatched": BOOL, "text": STR}, ["unwatched", "text"]),
}


def result_or_error(result: Schema, extra: dict[str, Schema] | None = None) -> Schema:
    """What a tool call returns in-process (``Gateway.call_tool``): its result or the error object.

    ``extra`` adds fields a face puts beside either (MCP: ``systemEvents``), declared and required.
    """
    out: Schema = {"type": "object", "anyOf": [result, ERROR]}
    if extra:
        out["properties"] = dict(extra)
        out["required"] = list(extra)
    return out
