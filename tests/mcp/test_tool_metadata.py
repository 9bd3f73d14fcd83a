"""Tool metadata over stdio with the real SDK client: titles, annotations, outputSchema, structuredContent.

Every result (errors included) is validated with ``jsonschema`` against the ``outputSchema`` the server
published, and the schemas are checked to be the engine's own, the same ones HTTP's OpenAPI publishes.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from sessionwatch.engine.tools import TOOLS
from sessionwatch.http import openapi, routes_tools
from sessionwatch.mcpserver import tool_list
from sessionwatch.mcpserver.texts import without_text
from tests.support.commands import SESSIONWATCH

from .helpers import MANAGER

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

READ_ONLY = {"session_status", "sessions_list", "sessions_history"}


def _stdio(url: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=SESSIONWATCH[0],
        args=[*SESSIONWATCH[1:], "--store", url, "mcp", "--session", MANAGER],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _validate(schema: dict[str, Any], value: Any) -> None:
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=str)
    assert not errors, [e.message for e in errors]


async def test_tools_carry_title_annotations_and_an_output_schema_their_results_match(
    sqlite_url: str, mode: str
) -> None:
    async with Client(_stdio(sqlite_url), mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == list(TOOLS)
        for name, tool in listed.items():
            hints = TOOLS[name].hints
            assert tool.title and tool.annotations is not None and tool.annotations.title == tool.title
            assert tool.annotations.read_only_hint is (name in READ_ONLY), name
            assert tool.annotations.destructive_hint is hints.destructive
            assert tool.annotations.idempotent_hint is hints.idempotent
            assert tool.annotations.open_world_hint is hints.open_world
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            Draft202012Validator.check_schema(tool.output_schema)
        # honest hints: only unwatch throws data away; only send reaches beyond the store
        assert [n for n, t in listed.items() if t.annotations.destructive_hint] == ["session_unwatch"]
        assert [n for n, t in listed.items() if t.annotations.open_world_hint] == ["sessions_send"]

        calls: list[tuple[str, dict[str, Any]]] = [
            ("sessions_spawn", {"label": "kid", "task": "count"}),
            ("sessions_send", {"sessionKey": "agent:main:subagent:kid", "message": "hi", "watch": True}),
            ("session_status", {"sessionKey": "agent:main:subagent:kid", "changesSince": 0}),
            ("sessions_list", {}),
            ("sessions_history", {"sessionKey": "agent:main:subagent:kid"}),
            ("session_unwatch", {"sessionKey": "agent:main:subagent:kid"}),
            # errors validate too (the schema admits the error object beside the result)
            ("session_status", {"sessionKey": "agent:main:nobody"}),
            ("sessions_history", {"sessionKey": "not a key"}),
        ]
        for name, args in calls:
            result = await client.call_tool(name, args)
            body = result.structured_content
            assert isinstance(body, dict) and isinstance(body["systemEvents"], list)
            _validate(listed[name].output_schema, body)
            if result.is_error:
                assert set(body) == {"error", "systemEvents"}
            else:
                # the engine's result schema, as HTTP publishes it, but for the text: the content block
                assert "text" not in body
                _validate(TOOLS[name].result_schema, {**body, "text": result.content[0].text})

        # an error object is no valid success: the schema tells the two apart
        errors = list(
            Draft202012Validator(TOOLS["session_status"].result_schema).iter_errors(
                {"error": {"code": "not_found", "message": "x"}}
            )
        )
        assert errors


def test_http_and_mcp_publish_the_same_result_schemas() -> None:
    doc = openapi.build(routes_tools.ROUTES, token_required=False)
    published = {t.name: t.output_schema for t in tool_list()}
    for name, tool in TOOLS.items():
        ok = doc["paths"][f"/v1/tools/{name}"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == tool.result_schema
        # MCP: the same result without its text (sent as the content block only), or the error object
        assert without_text(tool.result_schema) in published[name]["anyOf"]
        assert "text" in tool.result_schema["properties"]
        assert "text" not in without_text(tool.result_schema)["properties"]
