"""The installed ``sessionwatch mcp`` command as a subprocess: over stdio and over streamable HTTP."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.ports import refusing_port

from .helpers import MANAGER, assert_published_tools, mcp_http_server, run_every_tool, run_notice_scenario

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _person_types(url: str):
    def inbound(child: str) -> None:
        with Gateway.open(url, timers=False) as other_process_view:
            other_process_view.inbound(child, "a person types here", channel="webchat")

    return inbound


def _stdio(url: str) -> StdioServerParameters:
    command, *prefix = SESSIONWATCH
    return StdioServerParameters(
        command=command,
        args=[*prefix, "--store", url, "mcp", "--session", MANAGER],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def test_stdio_lists_calls_and_carries_a_notice_once(sqlite_url: str, mode: str) -> None:
    async with Client(_stdio(sqlite_url), mode=mode) as client:
        await assert_published_tools(client)
        await run_every_tool(client)
        await run_notice_scenario(client, _person_types(sqlite_url))
    with Gateway.open(sqlite_url, timers=False) as gw:
        assert gw.get_session(MANAGER)["kind"] == "main"  # created on start
        assert gw.peek_system_events(MANAGER) == []


@pytest.fixture
def http_mcp(sqlite_url: str) -> Iterator[tuple[str, str]]:
    token = "mcp-test-token"
    with mcp_http_server(sqlite_url, "--http-token", token) as (url, proc):
        yield url, token
    # Nothing but the protocol (here: nothing at all) may reach stdout; logs belong on stderr.
    assert proc.stdout is not None and proc.stdout.read() == b""


async def test_streamable_http_with_a_bearer_token(http_mcp: tuple[str, str], sqlite_url: str, mode: str) -> None:
    url, token = http_mcp
    refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        await assert_published_tools(client)
        await run_notice_scenario(client, _person_types(sqlite_url), child_label=f"kid-{mode}")


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
STREAM_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_streamable_http_refuses_pages_like_the_gateway(http_mcp: tuple[str, str]) -> None:
    """The SDK on its own let any page served from this machine in (Origin http://localhost:*); our guard
    applies the gateway's rules: a loopback Host with this port, no Origin unless configured, JSON bodies."""
    url, token = http_mcp
    port = url.split(":")[2].split("/")[0]
    auth = {"Authorization": f"Bearer {token}", **STREAM_ACCEPT}
    res = httpx.post(url, json=INIT, headers={**auth, "Origin": "http://localhost:5173"})
    assert res.status_code == 403 and res.json()["error"]["code"] == "forbidden", res.text
    res = httpx.post(url, json=INIT, headers={**auth, "Host": f"rebind.evil.example:{port}"})
    assert res.status_code == 421, res.text
    res = httpx.post(url, content=b"{}", headers={**auth, "Content-Type": "text/plain"})
    assert res.status_code == 415, res.text
    res = httpx.post(url, json=INIT, headers={**auth, "Host": f"localhost:{port}"})
    assert res.status_code == 200, res.text


def test_streamable_http_token_rules(tmp_path: Path, sqlite_url: str) -> None:
    with refusing_port() as port:  # refused before binding; a server that bound anyway would fail differently
        weak = subprocess.run(
            [
                *SESSIONWATCH,
                "--store",
                sqlite_url,
                "mcp",
                "--session",
                MANAGER,
                "--transport",
                "http",
                "--host",
                "0.0.0.0",
                "--port",
                str(port),
                "--http-token",
                "short",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert weak.returncode == 4 and "weak token" in weak.stderr, weak.stderr
    secret = tmp_path / "mcp-token"
    secret.write_text("mcp-token-from-a-file-0123456789\n")
    with mcp_http_server(sqlite_url, "--http-token-file", str(secret)) as (url, _):
        assert httpx.post(url, json=INIT, headers=STREAM_ACCEPT, timeout=5).status_code == 401
        res = httpx.post(
            url, json=INIT, headers={**STREAM_ACCEPT, "Authorization": "Bearer mcp-token-from-a-file-0123456789"}
        )
        assert res.status_code == 200, res.text
