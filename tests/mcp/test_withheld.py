"""Over MCP a tool result that carries a full queue says how many more watched sessions changed (issue 19,
item 3): one line after the notice lines in the text, ``systemEventsWithheld`` beside ``systemEvents``.
The line is no entry: the next call acknowledges the 20 ids as before and the other 10 ride along then.

In memory through the SDK's real client, and over stdio with the installed ``sessionwatch mcp``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding, build_server
from sessionwatch.notices import notice_text, withheld_line

from .helpers import MANAGER, structured

pytestmark = pytest.mark.anyio

SW = str(Path(sys.executable).parent / "sessionwatch")


def _thirty_changed_children(url: str) -> set[str]:
    """The manager's 30 children each had a person type into them; returns the 30 notice texts."""
    with Gateway.open(url, timers=False) as gw:
        gw.put_session(MANAGER)
        notices = set()
        for i in range(30):
            spawned = gw.call_tool("sessions_spawn", {"label": f"kid-{i:02d}"}, caller=MANAGER)
            gw.inbound(spawned["sessionKey"], f"person {i}: new plan", channel="webchat")
            notices.add(notice_text(spawned["sessionKey"], spawned["stateVersion"]))
        return notices


async def _twenty_a_line_then_ten(client: Client, notices: set[str]) -> None:
    first = await client.call_tool("sessions_list", {"limit": 1})
    body = structured(first)
    assert len(body["systemEvents"]) == 20 and body["systemEventsWithheld"] == 10
    head, _, rest = first.content[0].text.partition("\n\n")
    lines = head.splitlines()
    assert lines[:20] == [e["line"] for e in body["systemEvents"]]
    assert lines[20:] == [withheld_line(10)]
    assert rest and "more watched" not in rest  # the tool's own text follows, untouched

    second = await client.call_tool("sessions_list", {"limit": 1})
    body2 = structured(second)
    assert len(body2["systemEvents"]) == 10 and "systemEventsWithheld" not in body2
    assert "more watched" not in second.content[0].text
    got = [e["text"] for e in body["systemEvents"] + body2["systemEvents"]]
    assert len(got) == 30 and set(got) == notices  # each once

    third = structured(await client.call_tool("sessions_list", {"limit": 1}))
    assert third["systemEvents"] == [] and "systemEventsWithheld" not in third


async def test_in_memory_the_attachment_says_ten_more(sqlite_url: str, mode: str) -> None:
    notices = _thirty_changed_children(sqlite_url)
    with Gateway.open(sqlite_url) as gw:
        binding = SessionBinding(gw, MANAGER)
        async with Client(build_server(binding), mode=mode) as client:
            await _twenty_a_line_then_ten(client, notices)
        assert gw.peek_system_events(MANAGER) == []


@pytest.mark.slow
async def test_stdio_the_attachment_says_ten_more(sqlite_url: str) -> None:
    assert os.path.exists(SW), f"the sessionwatch command is not installed beside {sys.executable}"
    notices = _thirty_changed_children(sqlite_url)
    params = StdioServerParameters(
        command=SW,
        args=["--store", sqlite_url, "mcp", "--session", MANAGER],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with Client(params, mode="legacy") as client:
        await _twenty_a_line_then_ten(client, notices)
