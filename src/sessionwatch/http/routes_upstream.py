"""Catalogs, adoption and the upstream monitor (implemented by sessionwatch.upstream)."""

from __future__ import annotations

from typing import Any

from . import schemas
from .auth import ADMIN_ONLY
from .endpoints import Call, Endpoint

CATALOG_ID = {"type": "string", "minLength": 1, "maxLength": 200}


def _threads(c: Call) -> Any:
    return {"threads": c.gw.list_threads(c.path["catalogId"])}


def _continue(c: Call) -> Any:
    b = c.body
    kwargs: dict[str, Any] = {"session_key": b.get("sessionKey"), "agent_id": b.get("agentId")}
    if b.get("hostId") is not None:
        kwargs["host_id"] = b["hostId"]
    return c.gw.continue_thread(c.path["catalogId"], c.path["threadId"], **kwargs)


def _tick(c: Call) -> Any:
    return c.gw.upstream_tick()


def _results(c: Call) -> Any:
    return c.gw.upstream_results()


def _pair(c: Call) -> Any:
    return c.gw.pair_node(c.path["nodeId"], c.body["url"], c.body["token"])


# Every upstream call may scan files or reach a paired node: they run on worker threads. They read this
# machine's transcripts or configure the gateway itself, so they are admin-only (the default for a route
# outside /v1/sessions/{key}; declared here to say so).
ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/catalogs/{catalogId}/threads",
        "list_threads",
        "Threads a catalog lists (claude, codex, or node:<id>).",
        _threads,
        tag="upstream",
        result=schemas.R_THREADS,
        thread=True,
        touches=ADMIN_ONLY,
    ),
    Endpoint(
        "POST",
        "/v1/catalogs/{catalogId}/threads/{threadId}/continue",
        "continue_thread",
        "Adopt a catalog thread: link it to a session key with a baseline marker.",
        _continue,
        tag="upstream",
        body=schemas.CONTINUE,
        result=schemas.ANY_OBJECT,
        thread=True,
        touches=ADMIN_ONLY,
    ),
    Endpoint(
        "POST",
        "/v1/upstream/tick",
        "upstream_tick",
        "Run one monitor tick over every watched link now.",
        _tick,
        tag="upstream",
        body=schemas.EMPTY,
        result=schemas.ANY_OBJECT,
        thread=True,
        touches=ADMIN_ONLY,
    ),
    Endpoint(
        "GET",
        "/v1/upstream/results",
        "upstream_results",
        "Results of the last monitor tick.",
        _results,
        tag="upstream",
        result=schemas.ANY_OBJECT,
        thread=True,
        touches=ADMIN_ONLY,
    ),
    Endpoint(
        "PUT",
        "/v1/nodes/{nodeId}",
        "pair_node",
        "Pair a node (another machine running sessionwatch node).",
        _pair,
        tag="upstream",
        body=schemas.NODE,
        result=schemas.ANY_OBJECT,
        thread=True,
        touches=ADMIN_ONLY,
    ),
]
