"""The MCP server through a real SDK client in memory, in both protocol modes, on every store backend."""

from __future__ import annotations

import json
import threading

import pytest
from mcp import Client

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding, build_server
from tests.support.waiting import wait_until

from .helpers import MANAGER, assert_published_tools, call_ok, run_every_tool, run_notice_scenario, structured

pytestmark = pytest.mark.anyio


async def test_tools_are_published_with_the_engine_schemas(binding: SessionBinding, mode: str) -> None:
    async with Client(build_server(binding), mode=mode) as client:
        await assert_published_tools(client)


async def test_every_tool_runs_as_the_bound_session(binding: SessionBinding, mode: str) -> None:
    async with Client(build_server(binding), mode=mode) as client:
        await run_every_tool(client)


async def test_a_pending_notice_rides_along_exactly_once(gw: Gateway, binding: SessionBinding, mode: str) -> None:
    async with Client(build_server(binding), mode=mode) as client:
        await run_notice_scenario(client, lambda child: gw.inbound(child, "stop, use Q4", channel="webchat"))
    # Riding along was the acknowledgment: nothing stays queued, the cursor moved past the notice.
    assert gw.peek_system_events(MANAGER) == []
    [cursor] = gw.cursors(watcher=MANAGER)
    assert cursor["lastSeen"] == gw.state_version("agent:main:subagent:kid")


async def test_notices_ride_along_on_error_results_too(gw: Gateway, binding: SessionBinding) -> None:
    async with Client(build_server(binding)) as client:
        spawned = await call_ok(client, "sessions_spawn", {"label": "kid"})
        gw.inbound(spawned["sessionKey"], "hi", channel="webchat")
        bad = await client.call_tool("sessions_history", {"sessionKey": "not a key"})
        assert bad.is_error
        lines = bad.content[0].text.splitlines()
        assert lines[0].startswith("System: [") and "changed (other actor)" in lines[0]
        assert json.loads(lines[-1])["error"]["code"] == "invalid_argument"
        assert len(structured(bad)["systemEvents"]) == 1
        again = await client.call_tool("sessions_history", {"sessionKey": "not a key"})
        assert structured(again)["systemEvents"] == []


async def test_unknown_tool_and_bad_arguments_are_tool_errors(binding: SessionBinding, mode: str) -> None:
    async with Client(build_server(binding), mode=mode) as client:
        unknown = await client.call_tool("sessions_explode", {})
        assert unknown.is_error and structured(unknown)["error"]["code"] == "unknown_tool"
        wrong = await client.call_tool("session_status", {"changesSince": -1})
        assert wrong.is_error and structured(wrong)["error"]["code"] == "invalid_argument"
        extra = await client.call_tool("sessions_list", {"colour": "blue"})
        assert extra.is_error and structured(extra)["error"]["code"] == "invalid_argument"


async def test_a_notice_raised_while_a_send_waits_comes_back_with_its_reply(
    gw: Gateway, binding: SessionBinding
) -> None:
    async with Client(build_server(binding)) as client:
        child = (await call_ok(client, "sessions_spawn", {"label": "kid"}))["sessionKey"]

        def child_side() -> None:
            def asked() -> bool:  # the send waits for its reply once "report" is in the child's transcript
                history = gw.call_tool("sessions_history", {"sessionKey": child}, caller=child)["messages"]
                return "report" in [m["text"] for m in history]

            wait_until(asked, what="the send waiting")
            gw.inbound(child, "a person steps in meanwhile", channel="webchat")
            gw.append_message(child, "assistant", "done")

        helper = threading.Thread(target=child_side)
        helper.start()
        out = await call_ok(client, "sessions_send", {"sessionKey": child, "message": "report", "timeoutSeconds": 10})
        helper.join()
        assert out["status"] == "ok" and out["reply"] == "done"
        assert len(out["systemEvents"]) == 1 and child in out["systemEvents"][0]["text"]


def test_ensure_session_creates_a_missing_session_and_keeps_an_existing_one(gw: Gateway) -> None:
    created = SessionBinding(gw, "agent:ops:telegram:group:room-1").ensure_session()
    assert created["created"] is True and created["kind"] == "group"
    gw.put_session("agent:ops:main", kind="other", label="operator desk")
    kept = SessionBinding(gw, "agent:ops:main").ensure_session()
    assert kept["kind"] == "other" and kept["label"] == "operator desk"


async def test_a_bare_global_binding_names_its_agent(gw: Gateway) -> None:
    binding = SessionBinding(gw, "global", agent_id="ops")
    binding.ensure_session()
    async with Client(build_server(binding)) as client:
        status = await call_ok(client, "session_status", {})
        assert status["sessionKey"] == "global" and status["agentId"] == "ops"
