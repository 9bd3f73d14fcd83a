"""The OpenAPI 3.1 document, built from the endpoint table and the engine's tool definitions."""

from __future__ import annotations

import re
from typing import Any

from .. import __version__
from ..engine.tools import TOOLS
from . import schemas
from .auth import declared
from .endpoints import Endpoint

ERROR_STATUSES = {
    "400": "Bad input (invalid_argument).",
    "401": "Missing, wrong or revoked bearer token (unauthorized).",
    "403": "The caller may not do this, e.g. a token scoped to other agents (forbidden).",
    "404": "Unknown session, tool or route (not_found, unknown_tool).",
    "409": "Conflicting state (conflict).",
    "413": "Request body over the size limit (payload_too_large).",
    "429": "This token holds as many streams or requests in progress as one token may; retry after "
    "Retry-After (rate_limited).",
    "503": "The store or the upstream service is unavailable, or the gateway is starting (unavailable).",
}
_PARAM = re.compile(r"{(\w+)}")
PATH_PARAMS: dict[str, schemas.Schema] = {
    "key": schemas.KEY,
    "runId": schemas.NAME,
    "catalogId": schemas.NAME,
    "threadId": schemas.NAME,
    "nodeId": schemas.NAME,
    "name": schemas.NAME,
}


def _json(schema: schemas.Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _responses(result: schemas.Schema, ok: str = "OK") -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": ok, "content": _json(result)}}
    for status, text in ERROR_STATUSES.items():
        out[status] = {"description": text, "content": _json(schemas.ref("Error"))}
    return out


def _operation(
    ep: Endpoint,
    path: str,
    *,
    summary: str,
    body: schemas.Schema | None,
    result: schemas.Schema,
    extra_params: list[dict[str, Any]] | None = None,
    op_id: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    params = [
        {"name": p, "in": "path", "required": True, "schema": PATH_PARAMS.get(p, schemas.NAME)}
        for p in _PARAM.findall(path)
    ]
    params += [
        {"name": name, "in": "query", "required": name in ep.required_query, "schema": schema}
        for name, schema in ep.query.items()
    ]
    params += extra_params or []
    op: dict[str, Any] = {
        "operationId": op_id or ep.op_id,
        "summary": summary,
        "tags": [ep.tag],
        "responses": _responses(result),
    }
    if description:
        op["description"] = description
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": False, "content": _json(body)}
    return op


def tool_input_schema(schema: schemas.Schema) -> schemas.Schema:
    """A tool's input schema as HTTP accepts it: the engine treats a null optional argument as absent."""
    props = {}
    for name, prop in schema.get("properties", {}).items():
        if name not in schema.get("required", ()) and isinstance(prop.get("type"), str):
            prop = {**prop, "type": [prop["type"], "null"]}
        props[name] = prop
    return {**schema, "properties": props}


def _tool_paths(ep: Endpoint) -> dict[str, dict[str, Any]]:
    headers = [
        {
            "name": "X-Session-Key",
            "in": "header",
            "required": True,
            "schema": schemas.KEY,
            "description": "The calling session. Tools that act as the caller (sessions_spawn, sessions_send, "
            "session_unwatch) need an agent-qualified key.",
        },
        {
            "name": "X-Agent-Id",
            "in": "header",
            "required": False,
            "schema": schemas.AGENT_ID,
            "description": "The caller's agent when X-Session-Key is the bare 'global'.",
        },
    ]
    paths: dict[str, dict[str, Any]] = {}
    for name, tool in TOOLS.items():
        op = _operation(
            ep,
            f"/v1/tools/{name}",
            summary=f"Tool {name}",
            body=tool_input_schema(tool.input_schema),
            result=tool.result_schema,
            extra_params=headers,
            op_id=f"tool_{name}",
            description=tool.description,
        )
        paths[f"/v1/tools/{name}"] = {"post": op}
    return paths


def _stream_path(ep: Endpoint) -> dict[str, Any]:
    op = _operation(
        ep,
        ep.path,
        summary=ep.summary,
        body=None,
        result=schemas.ref("Wake"),
        description="`text/event-stream`. Each wake is `event: wake` with a JSON `data:` line "
        "(the Wake schema); `: keep-alive` comments keep the connection alive.",
    )
    op["responses"]["200"] = {
        "description": "An endless event stream of wakes.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
    return op


def build(endpoints: list[Endpoint], *, token_required: bool) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for ep in endpoints:
        if ep.op_id == "call_tool":
            paths.update(
                {
                    p: {m: {**op, "x-sessionwatch-access": "tool"} for m, op in ops.items()}
                    for p, ops in _tool_paths(ep).items()
                }
            )
            continue
        if ep.op_id == "stream_wakes":
            op = _stream_path(ep)
        elif ep.op_id == "stream_log":  # see http/log_stream.py
            op = _operation(
                ep, ep.path, summary=ep.summary, body=None, result=schemas.ANY_OBJECT, description=ep.description
            )
            op["responses"]["200"] = {
                "description": "An endless, resumable event stream of log events.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        elif ep.op_id == "metrics":
            op = _operation(
                ep, ep.path, summary=ep.summary, body=None, result=schemas.ANY_OBJECT, description=ep.description
            )
            op["responses"]["200"] = {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        elif ep.op_id in ("health", "health_ready", "health_live"):
            op = _operation(ep, ep.path, summary=ep.summary, body=None, result=schemas.ref("Health"))
            op["responses"] = {
                "200": {"description": "Ready.", "content": _json(schemas.ref("Health"))},
                "503": {"description": "Starting, failed or stopping.", "content": _json(schemas.ref("Health"))},
            }
            op["security"] = []
        else:
            op = _operation(
                ep,
                ep.path,
                summary=ep.summary,
                body=ep.body,
                result=ep.result or schemas.ANY_OBJECT,
                description=ep.description,
            )
        # Who may call it: admin (admin tokens only), sessions (a scoped token covering the sessions
        # it names), view (any token; answers narrowed to its agents), tool, or any.
        op["x-sessionwatch-access"] = declared(ep.touches, ep.path).kind
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "sessionwatch gateway",
            "version": __version__,
            "description": "Session state awareness over HTTP: the signal log, watchers, notices, wakes "
            "and the six tools. Errors are {error: {code, message}}.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas.COMPONENTS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    if token_required:
        doc["security"] = [{"bearer": []}]
    return doc
