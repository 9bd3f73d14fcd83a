"""JSON Schemas of the HTTP bodies and results (camelCase, as docs/http.md shows them).

Request schemas are inline (the validator in ``validate.py`` reads them); result schemas are
OpenAPI components referenced with ``ref()``. Tool input and result schemas are NOT here: they come
from ``engine.tools.TOOLS`` (results: ``engine.schemas``), so HTTP and MCP publish the same ones.
"""

from __future__ import annotations

from typing import Any

from ..engine import schemas as engine_schemas
from ..keys import SESSION_KINDS
from ..kinds import END_OUTCOMES, GOAL_ACTIONS, REPORTED_STATES, RUN_STATUSES
from ..settings import MAX_LIST_LIMIT

Schema = dict[str, Any]

KEY: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 512,
    "pattern": "^(?:global|agent:[^:]+:.+)$",
    "description": "Session key: 'agent:<agentId>:<rest>' or the bare 'global' (no whitespace or "
    "control characters, no empty ':'-separated part).",
}
AGENT_ID: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Agent of the session; needed for a bare 'global' key.",
}
NAME: Schema = {"type": "string", "minLength": 1, "maxLength": 200}
TEXT: Schema = {"type": "string", "minLength": 1}
OPT_NAME: Schema = {"type": ["string", "null"], "minLength": 1, "maxLength": 200}
OPT_KEY: Schema = {**KEY, "type": ["string", "null"]}
OPT_AGENT: Schema = {**AGENT_ID, "type": ["string", "null"]}
ACTOR: Schema = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["type"],
    "properties": {
        "type": {"type": "string", "enum": ["human", "agent", "system"]},
        "id": {"type": ["string", "null"], "minLength": 1, "maxLength": 512},
    },
}


def body(props: dict[str, Schema], required: list[str] | None = None) -> Schema:
    return {"type": "object", "properties": props, "required": required or [], "additionalProperties": False}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(name: str) -> Schema:
    return {"oneOf": [ref(name), {"type": "null"}]}


obj = engine_schemas.obj


def listing(field: str, item: Schema) -> Schema:
    return obj({field: {"type": "array", "items": item}}, [field])


STR, INT, BOOL, ANY_OBJECT = engine_schemas.STR, engine_schemas.INT, engine_schemas.BOOL, engine_schemas.ANY_OBJECT

# -- request bodies ------------------------------------------------------------------------------
AGENT_ONLY = body({"agentId": OPT_AGENT})
NUDGE = body({"agentId": OPT_AGENT, "waitMs": {"type": "integer", "minimum": 0, "maximum": 10_000}})
PUT_SESSION = body(
    {
        "agentId": OPT_AGENT,
        "kind": {"type": ["string", "null"], "enum": [*SESSION_KINDS, None]},
        "spawnedBy": OPT_KEY,
        "label": OPT_NAME,
        "createdBy": ACTOR,
    }
)
INBOUND = body(
    {
        "text": TEXT,
        "channel": {"type": "string", "maxLength": 200, "description": "Blank: 'via unknown'."},
        "provenance": {"type": ["string", "null"], "enum": ["external_user", "inter_session", "internal_system", None]},
        "sourceSessionKey": OPT_KEY,
        "humanId": OPT_NAME,
        "lane": OPT_NAME,
        "occurredAt": {"type": ["number", "null"], "description": "Epoch ms; clamped into [now - 24 h, now]."},
        "runId": OPT_NAME,
        "agentId": OPT_AGENT,
        "dedupeKey": OPT_NAME,
    },
    ["text", "channel"],
)
GOAL = body(
    {
        "action": {"type": "string", "enum": list(GOAL_ACTIONS)},
        "objective": {"type": ["string", "null"]},
        "status": OPT_NAME,
        "actor": ACTOR,
        "agentId": OPT_AGENT,
    },
    ["action"],
)
RUN_BEGIN = body({"runId": NAME, "agentId": OPT_AGENT}, ["runId"])
RUN_END = body({"status": {"type": "string", "enum": list(RUN_STATUSES)}, "agentId": OPT_AGENT}, ["status"])
COMPACTION = body({"operationId": NAME, "agentId": OPT_AGENT}, ["operationId"])
MESSAGE = body(
    {
        "role": {"type": "string", "enum": ["user", "assistant", "system"]},
        "text": {"type": "string"},
        "agentId": OPT_AGENT,
        "imported": {"type": "boolean"},
    },
    ["role", "text"],
)
ENQUEUE = body(
    {"text": TEXT, "contextKey": {"type": ["string", "null"], "minLength": 1, "maxLength": 2048}, "agentId": OPT_AGENT},
    ["text"],
)
ACK = body(
    {
        "ids": {
            "type": "array",
            "maxItems": 1000,
            "description": "Entry ids from a peek.",
            "items": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        },
        "agentId": OPT_AGENT,
    },
    ["ids"],
)
HOST_GONE = body(
    {
        "agentId": OPT_AGENT,
        "pid": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2**31 - 1,
            "description": "The host process whose address (its push inbox) is gone.",
        },
        "machine": {**OPT_NAME, "description": "Where pid ran (default: the gateway's machine)."},
    },
    ["pid"],
)
LIFECYCLE = body(
    {
        "state": {
            "type": "string",
            "enum": list(REPORTED_STATES),
            "description": "working (a turn runs), waiting (on a person), idle (the turn ended), ended. "
            "lost is decided by the gateway, never reported.",
        },
        "agentId": OPT_AGENT,
        "pid": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 2**31 - 1,
            "description": "The host process; on the gateway's machine (or the one named by machine) a session "
            "is lost only once this process is gone.",
        },
        "machine": {**OPT_NAME, "description": "Where pid runs (default: the gateway's machine)."},
        "host": {**OPT_NAME, "description": "The host program, e.g. claude or codex."},
        "outcome": {
            "type": ["string", "null"],
            "enum": [*END_OUTCOMES, None],
            "description": "How the session ended (state ended only).",
        },
        "at": {"type": ["number", "null"], "description": "When it happened (ms since the epoch; default now)."},
    },
    ["state"],
)
PRUNE = body({"force": {"type": "boolean"}})
EMPTY = body({})
WATCH = body({"watcher": KEY, "target": KEY, "agentId": OPT_AGENT}, ["watcher", "target"])
UNWATCH = body({"watcher": KEY, "target": KEY}, ["watcher", "target"])
CONTINUE = body({"sessionKey": OPT_KEY, "agentId": OPT_AGENT, "hostId": OPT_NAME})
NODE = body(
    {
        "url": {"type": "string", "minLength": 1, "maxLength": 2048},
        "token": {"type": "string", "minLength": 1, "maxLength": 4096},
    },
    ["url", "token"],
)

# -- result components (the tools' building blocks are the engine's, shared with MCP) --------------
COMPONENTS: dict[str, Schema] = {
    "Error": engine_schemas.ERROR,
    "Session": obj(
        {
            "sessionKey": STR,
            "agentId": STR,
            "sessionId": STR,
            "kind": {"type": "string", "enum": list(SESSION_KINDS)},
            "createdAt": INT,
            "updatedAt": INT,
            "spawnedBy": STR,
            "label": STR,
            "activeRunId": STR,
            "goal": ANY_OBJECT,
            "stateVersion": INT,
            "lifecycle": engine_schemas.LIFECYCLE,
            "created": BOOL,
        },
        ["sessionKey", "agentId", "sessionId", "kind", "createdAt", "updatedAt"],
    ),
    "ProjectedEvent": engine_schemas.PROJECTED_EVENT,
    "Event": obj(
        {**engine_schemas.EVENT_PROPS, "sessionKey": STR, "agentId": STR, "sessionId": STR, "dedupeKey": STR},
        ["sequence", "kind", "actorType", "occurredAt", "summary", "sessionKey", "agentId"],
    ),
    "Message": engine_schemas.MESSAGE,
    "QueueEntry": engine_schemas.QUEUE_ENTRY,
    "Cursor": obj(
        {
            "watcher": STR,
            "target": STR,
            "lastSeen": INT,
            "notified": INT,
            "material": INT,
            "provenance": STR,
            "updatedAt": INT,
        },
        ["watcher", "target", "lastSeen", "notified", "material", "provenance", "updatedAt"],
    ),
    "StateChanges": engine_schemas.STATE_CHANGES,
    "Wake": obj(
        {"watcher": STR, "target": STR, "reason": STR, "at": INT, "trailing": BOOL},
        ["watcher", "target", "reason", "at", "trailing"],
    ),
    "Health": obj(
        {
            "status": {"type": "string", "enum": ["starting", "ok", "failed", "stopping", "unavailable", "live"]},
            "storeUrl": STR,
            "version": STR,
            "swept": INT,
            "streams": INT,
            "message": STR,
            "state": STR,
            "writable": BOOL,
            "sweepRan": BOOL,
            "droppedRecordings": obj(
                {"total": INT, "byCause": {"type": "object", "additionalProperties": INT}}, ["total", "byCause"]
            ),
        },
        ["status"],
    ),
}

# Results of the host operations.
R_INBOUND = obj(
    {"recorded": BOOL, "event": nullable("Event"), "messageId": INT, "actorType": STR}, ["recorded", "event"]
)
R_GOAL = obj(
    {"recorded": BOOL, "goal": {"type": ["object", "null"]}, "event": nullable("Event")}, ["recorded", "goal", "event"]
)
R_RUN_BEGIN = obj({"sessionKey": STR, "activeRunId": STR}, ["sessionKey", "activeRunId"])
R_RECORDED = obj({"recorded": BOOL, "wasActive": BOOL, "event": nullable("Event")}, ["recorded", "event"])
R_LIFECYCLE = obj(
    {
        "sessionKey": STR,
        "agentId": STR,
        "lifecycle": engine_schemas.LIFECYCLE,
        "changed": {"type": "boolean", "description": "The state changed (its events were recorded)."},
        "stale": {"type": "boolean", "description": "Older than the current state's start: ignored."},
        "events": {"type": "array", "items": ref("Event")},
    },
    ["sessionKey", "agentId", "lifecycle", "changed", "stale", "events"],
)
R_HOST_GONE = obj(
    {
        "sessionKey": STR,
        "agentId": STR,
        "lifecycle": {"anyOf": [engine_schemas.LIFECYCLE, {"type": "null"}]},
        "lost": {"type": "boolean", "description": "The session became lost now (its session_lost recorded)."},
        "events": {"type": "array", "items": ref("Event")},
    },
    ["sessionKey", "agentId", "lifecycle", "lost", "events"],
)
R_HANDED_OUT = obj(
    {"ids": {"type": "array", "items": INT, "description": "Queue entry ids a hook gave the host, not yet acked."}},
    ["ids"],
)
R_DELETED = obj({"deleted": BOOL}, ["deleted"])
# withheld: present when the queue is full and the cap held back the notices of that many more watched
# sessions (they are queued again as the queue is taken)
R_ENTRIES = obj(
    {"entries": {"type": "array", "items": ref("QueueEntry")}, "withheld": {"type": "integer", "minimum": 1}},
    ["entries"],
)
R_ACKED = obj({"acknowledged": INT}, ["acknowledged"])
R_ENQUEUED = obj({"queued": BOOL, "entry": nullable("QueueEntry")}, ["queued", "entry"])
R_STATE_VERSION = obj({"sessionKey": STR, "agentId": STR, "stateVersion": INT}, ["sessionKey", "stateVersion"])
R_LINK = obj({"link": {"type": ["object", "null"]}}, ["link"])
R_CURSORS = listing("cursors", ref("Cursor"))
R_EVENTS = listing("events", ref("Event"))
R_PRUNE = obj(
    {"rowsDeleted": INT, "cursorsDeleted": INT, "headsStamped": INT, "skipped": BOOL},
    ["rowsDeleted", "cursorsDeleted", "headsStamped", "skipped"],
)
R_SWEPT = obj({"swept": INT}, ["swept"])
R_WATCHED = obj({"watched": BOOL}, ["watched"])
R_UNWATCHED = obj({"unwatched": BOOL}, ["unwatched"])
R_THREADS = listing("threads", ANY_OBJECT)

LIST_LIMIT: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT}
