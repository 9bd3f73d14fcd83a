"""At-least-once notices over MCP: a tool call the client cancels (Esc in Claude Code) must not take its
notices with it; the next call delivers them, exactly once (issue 8, item 2).

The stdio test runs the installed ``sessionwatch`` command found beside the running interpreter, through
the SDK's own client, which sends ``notifications/cancelled`` when the caller gives up on a request.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding, build_server
from sessionwatch.notices import notice_text
from tests.support.waiting import await_until

from .helpers import MANAGER, call_ok, structured

pytestmark = pytest.mark.anyio

SW = str(Path(sys.executable).parent / "sessionwatch")


def _messages(url: str, key: str) -> list[str]:
    with Gateway.open(url, timers=False) as view:
        return [m["text"] for m in view.call_tool("sessions_history", {"sessionKey": key}, caller=key)["messages"]]


async def _cancel_a_waiting_send(client: Client, url: str, child: str) -> list[Any]:
    """Start sessions_send with a reply wait, let a person type meanwhile, cancel the call, then let the
    reply arrive so the cancelled call's worker finishes (and would have consumed the queue).

    Returns the call's result if the client got one after all (the SDK's in-memory 2026-07-28 path
    does not interrupt a call in flight), else nothing."""
    got: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def waiting_send() -> None:
            got.append(
                await client.call_tool(
                    "sessions_send", {"sessionKey": child, "message": "are you there?", "timeoutSeconds": 30}
                )
            )

        tg.start_soon(waiting_send)

        async def reached() -> bool:
            return "are you there?" in await anyio.to_thread.run_sync(_messages, url, child)

        await await_until(reached, timeout=20, interval=0.05, what="the send reaching the child")
        with Gateway.open(url, timers=False) as person:  # another process: a person types into the child
            person.inbound(child, "a person types while the call waits", channel="webchat")
        tg.cancel_scope.cancel()  # the client gives up: notifications/cancelled goes out
        with Gateway.open(url, timers=False) as other:  # (no await here: still runs after the cancel)
            other.append_message(child, "assistant", "yes, here")  # ends the server-side wait
    # The cancelled call's worker finishes (its wait polls every 0.25 s). What it must not do (consume the
    # queue) leaves no trace to wait for, so this is a window for it to (wrongly) happen in.
    await anyio.sleep(1.5)
    return got


async def _the_next_call_delivers_it_once(client: Client, child: str, since: int, earlier: list[Any]) -> None:
    """Over the cancelled call (if it answered after all) and the next calls, the notice comes once."""
    first = await call_ok(client, "sessions_list", {})
    second = await call_ok(client, "sessions_list", {})
    carried = [e["text"] for r in earlier for e in structured(r)["systemEvents"]]
    carried += [e["text"] for e in first["systemEvents"]]
    assert carried == [notice_text(child, since)]
    assert second["systemEvents"] == []


@pytest.mark.slow
async def test_stdio_a_cancelled_call_leaves_its_notice_for_the_next(sqlite_url: str, mode: str) -> None:
    assert os.path.exists(SW), f"the sessionwatch command is not installed beside {sys.executable}"
    params = StdioServerParameters(
        command=SW,
        args=["--store", sqlite_url, "mcp", "--session", MANAGER],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with Client(params, mode=mode) as client:
        spawned = await call_ok(client, "sessions_spawn", {"label": "kid"})
        child = spawned["sessionKey"]
        earlier = await _cancel_a_waiting_send(client, sqlite_url, child)
        assert earlier == []  # really cancelled: the client never saw an answer
        await _the_next_call_delivers_it_once(client, child, spawned["stateVersion"], earlier)
    with Gateway.open(sqlite_url, timers=False) as gw:
        assert gw.peek_system_events(MANAGER) == []  # delivered, then acknowledged
        [cursor] = gw.cursors(watcher=MANAGER)
        assert cursor["lastSeen"] == cursor["material"]


async def test_in_memory_a_cancelled_call_leaves_its_notice(sqlite_url: str, mode: str) -> None:
    with Gateway.open(sqlite_url) as gw:
        binding = SessionBinding(gw, MANAGER)
        binding.ensure_session()
        async with Client(build_server(binding), mode=mode) as client:
            spawned = await call_ok(client, "sessions_spawn", {"label": "kid"})
            child = spawned["sessionKey"]
            earlier = await _cancel_a_waiting_send(client, sqlite_url, child)
            assert earlier == [] or mode == "auto"
            await _the_next_call_delivers_it_once(client, child, spawned["stateVersion"], earlier)
        assert gw.peek_system_events(MANAGER) == []


async def test_without_write_reports_the_next_call_acknowledges(gw: Gateway) -> None:
    """On a transport that does not report written answers (streamable HTTP), an answered call's notices
    are acknowledged when the session's next call starts, before that call looks at the queue."""
    binding = SessionBinding(gw, MANAGER)
    binding.ensure_session()
    spawned = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)
    gw.inbound(spawned["sessionKey"], "hi", channel="webchat")
    ticket = binding.open_call()
    first = binding.call("sessions_list", {}, ticket)
    binding.answered(ticket, "req-1")
    assert len(first.system_events) == 1
    assert len(gw.peek_system_events(MANAGER)) == 1  # not yet: the answer may still be on its way
    second = binding.call("sessions_list", {}, binding.open_call())
    assert second.system_events == [] and gw.peek_system_events(MANAGER) == []


async def test_concurrent_calls_do_not_both_carry_a_notice(gw: Gateway) -> None:
    binding = SessionBinding(gw, MANAGER)
    binding.ensure_session()
    spawned = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)
    gw.inbound(spawned["sessionKey"], "hi", channel="webchat")
    a, b = binding.open_call(), binding.open_call()
    first = binding.call("sessions_list", {}, a)  # still running when the second looks
    second = binding.call("sessions_list", {}, b)
    assert len(first.system_events) == 1 and second.system_events == []
    binding.abandon(a)  # the first was cancelled after all: the notice is anyone's again
    third = binding.call("sessions_list", {}, binding.open_call())
    assert [e["id"] for e in third.system_events] == [e["id"] for e in first.system_events]


async def test_without_write_reports_a_cancelled_call_acknowledges_nothing(gw: Gateway) -> None:
    """The streamable-HTTP path: a call cancelled while its worker runs must not count as delivered,
    although the worker finishes and the handler resumes without a checkpoint."""
    from sessionwatch.mcpserver.delivery import run_call

    binding = SessionBinding(gw, MANAGER)
    binding.ensure_session()
    child = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)["sessionKey"]
    gw.inbound(child, "hi", channel="webchat")
    with anyio.CancelScope() as scope:

        async def cancel_soon() -> None:  # once the send waits for its reply (its message is in the transcript)
            def sent() -> bool:
                history = gw.call_tool("sessions_history", {"sessionKey": child}, caller=child)["messages"]
                return "x" in [m["text"] for m in history]

            await await_until(lambda: anyio.to_thread.run_sync(sent), what="the send waiting")
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            await run_call(
                binding, "req-9", "sessions_send", {"sessionKey": child, "message": "x", "timeoutSeconds": 1}
            )
    assert scope.cancelled_caught
    nxt = binding.call("sessions_list", {}, binding.open_call())
    assert [e["contextKey"] for e in nxt.system_events] == [e["contextKey"] for e in gw.peek_system_events(MANAGER)]
    assert len(nxt.system_events) == 1
