"""One declaration of the operations (sessionwatch.client_ops): both clients and the CLI's remote mode are
built from it, and every request it declares is a route the gateway documents, with fields it takes."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from sessionwatch.cli.backend import Backend
from sessionwatch.client import AsyncGatewayClient, GatewayClient
from sessionwatch.client_ops import CLIENT_METHODS, OPS, Operations


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_both_clients_take_every_operation_from_the_declaration() -> None:
    for name in OPS:
        declared = getattr(Operations, name)
        assert GatewayClient.__dict__[name].__wrapped__ is declared, name
        assert AsyncGatewayClient.__dict__[name].__wrapped__ is declared, name
    for name in CLIENT_METHODS:
        assert name not in OPS and hasattr(GatewayClient, name) and hasattr(AsyncGatewayClient, name), name


def test_every_declared_request_is_a_documented_route_with_those_fields(http: httpx.Client) -> None:
    doc = http.get("/v1/openapi.json").json()
    paths = {_template(p): ops for p, ops in doc["paths"].items()}
    for op in OPS.values():
        route = paths.get(_template(op.path), {}).get(op.method.lower())
        assert route is not None, f"{op.name}: {op.method} {op.path} is not a route of the gateway"
        query = {p["name"] for p in route.get("parameters", []) if p.get("in") == "query"}
        assert set(op.query or {}) <= query, (op.name, sorted(set(op.query or {}) - query))
        if op.body:
            schema: dict[str, Any] = route["requestBody"]["content"]["application/json"]["schema"]
            ref = schema.get("$ref")
            if ref:
                schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
            assert set(op.body) <= set(schema.get("properties", {})), (op.name, sorted(op.body))


def test_the_cli_remote_mode_offers_exactly_the_declared_operations(http: httpx.Client) -> None:
    url = str(http.base_url).rstrip("/")
    backend = Backend(GatewayClient(url), remote=True, where=url)
    try:
        assert backend.upstream_results() == http.get("/v1/upstream/results").json()
        assert callable(backend.drain_system_events) and callable(backend.stream_wakes)
        assert getattr(backend, "subscribe_wakes", None) is None  # in-process only: a feature check sees it missing
        assert callable(backend.list_sessions_page)  # the Backend's own (through the sessions_list tool)
        with pytest.raises(AttributeError, match="client_ops"):
            backend.wait_for_reply  # noqa: B018 - an engine-only name
    finally:
        backend.close()
