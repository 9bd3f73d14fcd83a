"""MCP over streamable HTTP: a client whose connection drops while a call carrying a notice is in flight
must not lose the notice (issue 19, item 3).

The installed ``sessionwatch mcp --transport http`` runs as a subprocess on loopback; each round raises a
notice for the bound session, sends a ``tools/call`` on a raw socket of one MCP session and resets the
connection (SO_LINGER 0) at a point of the call, then opens a new MCP session, which must be handed the
notice in a complete answer; its next call confirms that answer, so the queue ends empty.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionwatch import Gateway

from .helpers import MANAGER, mcp_http_server
from .raw_http import RawMCP, reset

pytestmark = pytest.mark.slow

TOKEN = "mcp-drop-test-token"
ROUNDS = 25


@pytest.fixture
def served(sqlite_url: str, tmp_path: Path) -> Iterator[str]:
    with (
        (tmp_path / "mcp.log").open("wb") as log,
        mcp_http_server(sqlite_url, "--http-token", TOKEN, stderr=log) as (url, _),
    ):
        yield url


def _dropped_call(url: str, round_no: int, child: str, gw: Gateway) -> None:
    """A call of a fresh MCP session whose connection is reset before the client reads its answer."""
    client = RawMCP(url, TOKEN)
    client.initialize()
    way = round_no % 3
    if way == 2:  # a call that surely is in flight: a send waiting for a reply
        send = {"sessionKey": child, "message": f"ping {round_no}", "timeoutSeconds": 2}
        sock = client.open(client.tool_call("sessions_send", send))
        deadline = time.monotonic() + 20
        while f"ping {round_no}" not in [
            m["text"] for m in gw.call_tool("sessions_history", {"sessionKey": child}, caller=child)["messages"]
        ]:
            assert time.monotonic() < deadline, "the send never reached the child"
            time.sleep(0.02)
        reset(sock)
        return
    sock = client.open(client.tool_call("sessions_list", {}))
    if way == 1:
        client.read_head(sock)  # the answer has begun: the call was dispatched
    reset(sock)


def test_a_dropped_http_call_loses_no_notice(served: str, sqlite_url: str) -> None:
    carried: dict[str, int] = {}
    with Gateway.open(sqlite_url, timers=False) as gw:
        for round_no in range(ROUNDS):
            child = gw.call_tool("sessions_spawn", {"label": f"kid{round_no}"}, caller=MANAGER)["sessionKey"]
            gw.inbound(child, f"a person types {round_no}", channel="webchat")
            carried[child] = 0
            _dropped_call(served, round_no, child, gw)

            later = RawMCP(served, TOKEN)  # the client comes back: a new connection, a new MCP session
            later.initialize()
            deadline = time.monotonic() + 3
            while not carried[child] and time.monotonic() < deadline:
                for event in later.call("sessions_list", {})["systemEvents"]:
                    for key in carried:
                        if f'"{key}"' in event["text"]:
                            carried[key] += 1
                if not carried[child]:
                    time.sleep(0.1)
            # The next call of that session confirms what it was handed: nothing rides along again.
            assert later.call("sessions_list", {})["systemEvents"] == [], f"round {round_no}"
        lost = [key for key, times in carried.items() if times == 0]
        assert lost == [], f"{len(lost)} of {ROUNDS} notices never reached a complete answer"
        assert gw.peek_system_events(MANAGER) == []
        assert all(times == 1 for times in carried.values()), carried
