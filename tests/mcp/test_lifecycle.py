"""Lifecycle state through a real MCP SDK client (in memory, both protocol modes): sessions_list shows
and filters it, session_status shows it, and a child's end rides along to its parent as one notice,
validated against the published outputSchema."""

from __future__ import annotations

import jsonschema
import pytest
from mcp import Client

from sessionwatch import Gateway
from sessionwatch.engine.tools import TOOLS
from sessionwatch.mcpserver import SessionBinding, build_server

from .helpers import MANAGER, call_ok, structured

pytestmark = pytest.mark.anyio


async def test_states_are_listed_filtered_and_an_end_rides_along(
    gw: Gateway, binding: SessionBinding, mode: str
) -> None:
    async with Client(build_server(binding), mode=mode) as client:
        kid = (await call_ok(client, "sessions_spawn", {"label": "kid"}))["sessionKey"]
        gw.report_lifecycle(kid, "waiting", host="claude")
        listed = await call_ok(client, "sessions_list", {"lifecycle": "waiting"})
        jsonschema.validate(listed, TOOLS["sessions_list"].result_schema)
        assert [(s["sessionKey"], s["lifecycle"]["state"]) for s in listed["sessions"]] == [(kid, "waiting")]
        assert "waiting since" in listed["text"]
        both = await call_ok(client, "sessions_list", {"lifecycle": ["idle", "ended"]})
        assert both["sessions"] == []
        bad = await client.call_tool("sessions_list", {"lifecycle": "asleep"})
        assert bad.is_error and structured(bad)["error"]["code"] == "invalid_argument"
        st = await call_ok(client, "session_status", {"sessionKey": kid})
        jsonschema.validate(st, TOOLS["session_status"].result_schema)
        assert st["lifecycle"]["state"] == "waiting" and "lifecycle: waiting since" in st["text"]
        # a turn is nobody's news; the end is, once
        gw.report_lifecycle(kid, "working")
        quiet = await client.call_tool("sessions_list", {})
        assert structured(quiet)["systemEvents"] == []
        gw.report_lifecycle(kid, "ended", outcome="ok")
        told = await client.call_tool("sessions_list", {})
        events = structured(told)["systemEvents"]
        assert len(events) == 1 and events[0]["text"].startswith(f'Session "{kid}" changed (other actor).')
        again = await client.call_tool("sessions_list", {})
        assert structured(again)["systemEvents"] == []
    assert gw.peek_system_events(MANAGER) == []
