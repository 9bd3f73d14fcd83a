"""Assertions shared by the in-memory, stdio and HTTP MCP tests (one scenario, three transports)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

from mcp import Client

from sessionwatch.engine.tools import TOOLS
from sessionwatch.notices import notice_text

MANAGER = "agent:main:main"


async def assert_published_tools(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == list(TOOLS)
    for t in listed:
        assert t.input_schema == TOOLS[t.name].input_schema, t.name
        assert t.description == TOOLS[t.name].description, t.name


def structured(result: Any) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def call_ok(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The structured result, with the tool's own text (the content block after any notice lines) as
    ``text``: structuredContent never repeats it (a host hands the model both)."""
    result = await client.call_tool(name, args)
    body = structured(result)
    assert not result.is_error, body
    assert "text" not in body
    text = result.content[0].text
    return {**body, "text": text.split("\n\n", 1)[1] if body["systemEvents"] else text}


async def run_notice_scenario(client: Client, person_types: Callable[[str], None], child_label: str = "kid") -> None:
    """Spawn a child, let a person type into it, and see the notice ride along exactly once."""
    spawned = await call_ok(client, "sessions_spawn", {"label": child_label, "task": "count the apples"})
    child = spawned["sessionKey"]
    assert child == f"agent:main:subagent:{child_label}"
    assert spawned["systemEvents"] == []

    person_types(child)

    first = await client.call_tool("sessions_list", {})
    body = structured(first)
    assert not first.is_error
    expected = notice_text(child, spawned["stateVersion"])
    assert [e["text"] for e in body["systemEvents"]] == [expected]
    text = first.content[0].text
    assert text.startswith("System: [") and text.splitlines()[0].endswith(expected)
    assert "text" not in body and text.split("\n\n", 1)[1]  # the tool's own text follows the notice lines

    second = await call_ok(client, "sessions_list", {})
    assert second["systemEvents"] == []
    assert not second["text"].startswith("System:")

    # Reconciling with the number from the notice gives the person's turn.
    status = await call_ok(client, "session_status", {"sessionKey": child, "changesSince": spawned["stateVersion"]})
    assert [e["kind"] for e in status["stateChanges"]["events"]] == ["human_direct_message"]


async def run_every_tool(client: Client) -> None:
    """Each of the six tools answers as the bound session."""
    spawned = await call_ok(client, "sessions_spawn", {"label": "worker"})
    child = spawned["sessionKey"]
    sent = await call_ok(client, "sessions_send", {"sessionKey": child, "message": "hello worker", "watch": True})
    assert sent["status"] == "accepted" and sent["watched"] is True
    status = await call_ok(client, "session_status", {})
    assert status["sessionKey"] == MANAGER  # default: the caller's own session
    listed = await call_ok(client, "sessions_list", {"kinds": ["subagent"]})
    assert {"sessionKey": child, "spawnedBy": MANAGER}.items() <= next(
        s for s in listed["sessions"] if s["sessionKey"] == child
    ).items()
    history = await call_ok(client, "sessions_history", {"sessionKey": child})
    inter = [m for m in history["messages"] if m["text"] == "hello worker"]
    assert inter and inter[0].get("sourceSessionKey") == MANAGER
    unwatched = await call_ok(client, "session_unwatch", {"sessionKey": child})
    assert unwatched["unwatched"] is True

    bad = await client.call_tool("session_status", {"sessionKey": "agent:main:nobody"})
    assert bad.is_error
    assert json.loads(bad.content[0].text)["error"]["code"] == "not_found"
    assert structured(bad)["error"]["code"] == "not_found"


@contextlib.contextmanager
def mcp_http_server(
    store_url: str, *token_args: str, stderr: Any = subprocess.PIPE
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``sessionwatch mcp --transport http`` bound to MANAGER on a socket opened here, once it answers; stopped after.

    ``token_args`` are the token options (``--http-token T`` or ``--http-token-file PATH``). ``stderr``: where
    its log goes (a test making hundreds of requests passes a file: nothing drains the pipe meanwhile)."""
    from tests.support.commands import SESSIONWATCH
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    sock = listening_socket()  # served with --fd: no port race
    url = f"{url_of(sock)}/mcp"
    proc = spawn_serving(
        [*SESSIONWATCH, "--store", store_url, "mcp", "--session", MANAGER, "--transport", "http", *token_args],
        sock,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    try:
        wait_http(url, proc, status=None)  # any answer: the server is up (without a token it is a 401)
        yield url, proc
    finally:
        stop(proc)
