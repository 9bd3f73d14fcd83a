"""The MCP streamable-HTTP transport honours tokens of the store's token table, scoped to agents."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sessionwatch import Gateway
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token

from .helpers import MANAGER, mcp_http_server, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMIN = "mcp-admin-token-0123456789"
OTHER_MAIN = "agent:oth:main"


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    with Gateway.open(sqlite_url, timers=False) as gw:
        gw.put_session(OTHER_MAIN)
        gw.append_message(OTHER_MAIN, "user", "the other team's secret")
    store = open_store(sqlite_url)
    own, _ = create_token(store, agents=["main"])
    other, _ = create_token(store, agents=["oth"])
    store.close()
    with mcp_http_server(sqlite_url, "--http-token", ADMIN) as (url, _):
        yield url, {"own": own, "other": other}


async def test_scoped_tokens_on_the_mcp_http_transport(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert httpx.post(url, json=ask, headers={"Authorization": "Bearer sw_000000000000_" + "x" * 43}).status_code == 401
    # a token of another agent may not drive a session bound to agent 'main'
    refused = httpx.post(url, json=ask, headers={"Authorization": f"Bearer {tokens['other']}"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens['own']}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        mine = structured(await client.call_tool("session_status", {}))
        assert mine["sessionKey"] == MANAGER
        listed = structured(await client.call_tool("sessions_list", {}))
        assert [s["sessionKey"] for s in listed["sessions"]] == [MANAGER]
        leak = structured(await client.call_tool("sessions_history", {"sessionKey": OTHER_MAIN}))
        assert leak["error"]["code"] == "forbidden" and "secret" not in str(leak)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        seen = structured(await client.call_tool("sessions_history", {"sessionKey": OTHER_MAIN}))
        assert [m["text"] for m in seen["messages"]] == ["the other team's secret"]
