"""What the MCP face says about itself, with no MCP SDK import: the server's instructions, the bound
session's notices resource (its URI, and as ``resources/list`` carries it) and the published tools as
JSON. The quick start (``quickstart.py``) answers the handshake with them before the SDK has loaded (or
without ever loading it); the SDK server (``server.py``) publishes the same."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..engine.schemas import QUEUE_ENTRY, Schema, result_or_error
from ..engine.tools import TOOLS, Tool

INSTRUCTIONS = (
    "sessionwatch tools, called as session {key}. When a result starts with 'System: ... changed (other "
    "actor)', another actor touched a session you work with: call session_status with the sessionKey and "
    "changesSince from that line before acting on it. A notice comes again only if its earlier answer "
    "never reached you. The resource {uri} lists the notices still pending (reading it does not consume "
    "them); subscribe to it to be told when one arrives."
)


def notices_uri(session_key: str) -> str:
    """``sessionwatch://sessions/<key>/notices``; the key is percent-encoded except ':' and '@'."""
    return f"sessionwatch://sessions/{quote(session_key, safe=':@')}/notices"


NOTICES_MIME = "application/json"


def notices_resource_json(session_key: str) -> dict[str, Any]:
    """The bound session's notices resource as ``resources/list`` carries it."""
    return {
        "uri": notices_uri(session_key),
        "name": "notices",
        "title": f"Pending notices of {session_key}",
        "description": "System events queued for this session and not yet delivered. Reading is a peek: "
        "notices are delivered (and acknowledged) with tool results. Subscribe to be told when the list changes.",
        "mimeType": NOTICES_MIME,
    }


# A server bound late (the host names the session only in each call): no key, no resource yet.
LATE_INSTRUCTIONS = (
    "sessionwatch tools, called as the host session that calls them (its own key, named by the host in "
    "each call). When a result starts with 'System: ... changed (other actor)', another actor touched a "
    "session you work with: call session_status with the sessionKey and changesSince from that line before "
    "acting on it. A notice comes again only if its earlier answer never reached you."
)


def instructions(session_key: str | None) -> str:
    if session_key is None:
        return LATE_INSTRUCTIONS
    return INSTRUCTIONS.format(key=session_key, uri=notices_uri(session_key))


# Every structured result of this face carries the notices that rode along with it (see binding.py).
SYSTEM_EVENTS: Schema = {
    "type": "array",
    "items": QUEUE_ENTRY,
    "description": "Notices for the bound session delivered with this result (often empty).",
}
SYSTEM_EVENTS_WITHHELD: Schema = {
    "type": "integer",
    "minimum": 1,
    "description": "Present when the queue was full: how many more watched sessions changed whose notices "
    "follow on later calls.",
}


def without_text(schema: Schema) -> Schema:
    """A result schema without its ``text`` field (through ``anyOf``/``oneOf`` branches): the MCP face
    sends the text as the content block only (binding.CallOutcome.structured)."""
    out = dict(schema)
    for branch in ("anyOf", "oneOf"):
        if isinstance(out.get(branch), list):
            out[branch] = [without_text(s) for s in out[branch]]
    if isinstance(out.get("properties"), dict) and "text" in out["properties"]:
        out["properties"] = {k: v for k, v in out["properties"].items() if k != "text"}
        if isinstance(out.get("required"), list):
            out["required"] = [k for k in out["required"] if k != "text"]
    return out


def output_schema(tool: Tool) -> Schema:
    """The tool's result without ``text`` (or the error object), plus ``systemEvents``: exactly what
    ``structuredContent`` holds.

    Error results validate too: the MCP specification leaves open whether ``outputSchema`` applies to
    ``isError`` results (the SDKs skip them), so the schema admits both rather than betting on a client.
    """
    out = result_or_error(without_text(tool.result_schema), {"systemEvents": SYSTEM_EVENTS})
    out["properties"]["systemEventsWithheld"] = SYSTEM_EVENTS_WITHHELD  # only when there are: not required
    return out


def tools_json() -> list[dict[str, Any]]:
    """The published tools as ``tools/list`` carries them: names, titles, descriptions, annotations and
    schemas as the engine defines them."""
    return [
        {
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "inputSchema": t.input_schema,
            "outputSchema": output_schema(t),
            "annotations": {
                "title": t.title,
                "readOnlyHint": t.hints.read_only,
                "destructiveHint": t.hints.destructive,
                "idempotentHint": t.hints.idempotent,
                "openWorldHint": t.hints.open_world,
            },
        }
        for t in TOOLS.values()
    ]
