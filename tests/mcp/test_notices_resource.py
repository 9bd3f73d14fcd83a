"""The notices resource over stdio with the real SDK client, and its subscription push.

A person's inbound is recorded into the watched child by *another process* (the ``sessionwatch inbound``
CLI), and the subscribed client receives ``notifications/resources/updated`` without calling a tool:

- SQLite file: found by the server's short poll (SQLite has no cross-process wake path);
- PostgreSQL, poll off: carried by the store's LISTEN/NOTIFY wake into ``Gateway.subscribe_wakes``;
- a remote gateway (``--gateway``), poll off: carried by the gateway's SSE wake stream.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from sessionwatch.mcpserver.notices_feed import notices_uri
from sessionwatch.notices import notice_text
from tests.support.commands import SESSIONWATCH

from .helpers import MANAGER

# 2025-era clients subscribe with resources/subscribe, which the SDK flags as removed in 2026-07-28
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]

URI = notices_uri(MANAGER)
CHILD = "agent:main:subagent:kid"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def _person_types(where: list[str], text: str = "a person types here") -> None:
    """Another process: the installed CLI records a person's turn into the child."""
    done = subprocess.run(
        [*SESSIONWATCH, *where, "inbound", CHILD, text, "--channel", "webchat"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _updated_uri(message: Any) -> str | None:
    note = getattr(message, "root", message)
    if getattr(note, "method", None) == "notifications/resources/updated":
        return str(note.params.uri)
    return None


@asynccontextmanager
async def _subscribed(where: list[str], mode: str, poll: float) -> AsyncIterator[tuple[Client, Any]]:
    """A stdio client subscribed to the notices resource; yields (client, next_update) where
    ``await next_update(timeout)`` returns the URI of the next resources/updated push."""
    send, recv = anyio.create_memory_object_stream[str](16)

    async def on_message(message: Any) -> None:
        uri = _updated_uri(message)
        if uri is not None:
            await send.send(uri)

    params = StdioServerParameters(
        command=SESSIONWATCH[0],
        args=[*SESSIONWATCH[1:], *where, "mcp", "--session", MANAGER, "--notice-poll", str(poll)],
        env=_env(),
    )
    async with Client(params, mode=mode, message_handler=on_message) as client:
        if mode == "legacy":
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe is True
            await client.subscribe_resource(URI)

            async def next_update(timeout: float) -> str:
                with anyio.fail_after(timeout):
                    return await recv.receive()

            yield client, next_update
        else:
            async with client.listen(resource_subscriptions=[URI]) as sub:
                assert sub.honored.resource_subscriptions == [URI]

                async def next_update(timeout: float) -> str:
                    with anyio.fail_after(timeout):
                        event = await sub.__anext__()
                    return str(event.uri)

                yield client, next_update


async def _read(client: Client) -> list[dict[str, Any]]:
    result = await client.read_resource(URI)
    (content,) = result.contents
    assert content.mime_type == "application/json"
    body = json.loads(content.text)
    assert body["sessionKey"] == MANAGER
    return body["entries"]


async def _scenario(where: list[str], mode: str, poll: float) -> None:
    async with _subscribed(where, mode, poll) as (client, next_update):
        listed = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed] == [URI]
        spawned = (await client.call_tool("sessions_spawn", {"label": "kid"})).structured_content
        assert spawned["sessionKey"] == CHILD
        assert await _read(client) == []
        # a spawn delivers nothing, so no update is due; drain any stray one of the spawn's own kick
        with anyio.move_on_after(0.5 + poll):
            await next_update(5)

        await anyio.to_thread.run_sync(_person_types, where)
        assert await next_update(20) == URI  # pushed: no tool call in between

        expected = notice_text(CHILD, spawned["stateVersion"])
        entries = await _read(client)
        assert [e["text"] for e in entries] == [expected]
        assert await _read(client) == entries  # reading is a peek: nothing was consumed

        # the next tool call still delivers the notice
        result = await client.call_tool("sessions_list", {})
        assert [e["text"] for e in result.structured_content["systemEvents"]] == [expected]


async def test_sqlite_subscription_sees_another_process_by_polling(sqlite_url: str, mode: str) -> None:
    await _scenario(["--store", sqlite_url], mode, poll=0.2)


async def test_unknown_resource_is_an_error(sqlite_url: str) -> None:
    from mcp.shared.exceptions import MCPError

    async with _subscribed(["--store", sqlite_url], "legacy", 0.2) as (client, _):
        with pytest.raises(MCPError):
            await client.read_resource("sessionwatch://sessions/agent:main:other/notices")


@pytest.fixture
def pg_url() -> Iterator[str]:
    from tests.support import pg

    if not pg.available():
        pytest.skip("PostgreSQL is not reachable")
    with pg.fresh_database() as url:
        yield url


@pytest.mark.postgres
async def test_postgres_subscription_is_pushed_by_the_cross_process_wake(pg_url: str) -> None:
    # poll 0: only the LISTEN/NOTIFY wake can trigger the update
    await _scenario(["--store", pg_url], "auto", poll=0)


async def test_remote_gateway_subscription_is_pushed_by_the_sse_wake_stream(tmp_path: Path) -> None:
    from tests.http.conftest import GatewayProcess

    gateway = GatewayProcess(f"sqlite:///{tmp_path}/state.db", tmp_path / "gateway.log").start()
    try:
        await _scenario(["--gateway", gateway.url], "auto", poll=0)
    finally:
        gateway.stop()
