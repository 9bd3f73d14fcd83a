"""The installed ``sessionwatch mcp`` command as a subprocess: over stdio and over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from sessionwatch import Gateway

from .helpers import MANAGER, SW, assert_published_tools, run_every_tool, run_notice_scenario
from tests.support.procs import stop

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _person_types(url: str):
    def inbound(child: str) -> None:
        with Gateway.open(url, timers=False) as other_process_view:
            other_process_view.inbound(child, "a person types here", channel="webchat")
    return inbound


def _stdio(url: str) -> StdioServerParameters:
    return StdioServerParameters(command=SW, args=["--store", url, "mcp", "--session", MANAGER],
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})


async def test_stdio_lists_calls_and_carries_a_notice_once(sqlite_url: str, mode: str) -> None:
    async with Client(_stdio(sqlite_url), mode=mode) as client:
        await assert_published_tools(client)
        await run_every_tool(client)
        await run_notice_scenario(client, _person_types(sqlite_url))
    with Gateway.open(sqlite_url, timers=False) as gw:
        assert gw.get_session(MANAGER)["kind"] == "main"  # created on start
        assert gw.peek_system_events(MANAGER) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_mcp(sqlite_url: str) -> Iterator[tuple[str, str]]:
    port = _free_port()
    token = "mcp-test-token"
    proc = subprocess.Popen([SW, "--store", sqlite_url, "mcp", "--session", MANAGER, "--transport", "http",
                             "--port", str(port), "--http-token", token],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "MCP HTTP server did not start"
                time.sleep(0.05)
        yield url, token
    finally:
        stop(proc)
        # Nothing but the protocol (here: nothing at all) may reach stdout; logs belong on stderr.
        assert proc.stdout is not None and proc.stdout.read() == b""


async def test_streamable_http_with_a_bearer_token(http_mcp: tuple[str, str], sqlite_url: str, mode: str) -> None:
    url, token = http_mcp
    refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            await assert_published_tools(client)
            await run_notice_scenario(client, _person_types(sqlite_url), child_label=f"kid-{mode}")
