"""One ``sessionwatch mcp`` for every session of a host process (OpenCode's): each call runs as the session it
names in ``_sessionwatch`` (sessionwatch's OpenCode plugin adds it), with that session's own notices riding
along and acknowledged once the answer was written; a call that names none is refused, and a bound server
(``--session``) runs as its key whatever a call names. The real command on stdio, a real store."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.hosts.jsonrpc import LineClient
from sessionwatch.mcpserver.texts import LATE_INSTRUCTIONS
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

OTHER = "agent:main:other"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, Gateway]]:
    url = f"sqlite:///{tmp_path / 'sw.db'}"
    gw = Gateway.open(url, timers=False)
    gw.put_session(OTHER)
    try:
        yield url, gw
    finally:
        gw.close()


def serve(
    tmp_path: Path, url: str, *more: str, host: str | None = "opencode", env_extra: dict[str, str] | None = None
) -> LineClient:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "CLAUDE_CODE_"))}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env.update(env_extra or {})
    if host:
        env["SESSIONWATCH_SESSION_PER_CALL"] = host
    client = LineClient([*SESSIONWATCH, "--store", url, "mcp", *more], cwd=tmp_path, env=env, timeout=60, jsonrpc=True)
    hello = client.call(
        "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )
    client.notify("notifications/initialized")
    client.hello = hello  # type: ignore[attr-defined]
    return client


def call(client: LineClient, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    out = client.call("tools/call", {"name": name, "arguments": args})
    return bool(out.get("isError")), str(out["content"][0]["text"])


def test_each_call_runs_as_the_session_it_names_with_that_sessions_notices(
    tmp_path: Path, store: tuple[str, Gateway]
) -> None:
    url, gw = store
    a, b = "agent:acme:opencode:ses_a", "agent:acme:opencode:ses_b"
    gw.put_session(a)
    assert gw.watch(a, OTHER)
    gw.inbound(OTHER, "ship on Friday", channel="slack")
    (notice,) = [e["line"] for e in gw.peek_system_events(a)]
    client = serve(tmp_path, url, "--agent", "acme")
    try:
        assert client.hello["instructions"] == LATE_INSTRUCTIONS  # type: ignore[attr-defined]
        assert len(client.call("tools/list", {})["tools"]) == 6
        assert client.call("resources/list", {})["resources"] == []  # no one session to watch

        error, text = call(client, "sessions_list", {})  # names no session: refused, nothing taken
        assert error and "plugin names it" in text, text
        assert [e["line"] for e in gw.peek_system_events(a)] == [notice]

        error, text = call(client, "sessions_list", {"_sessionwatch": {"session_id": "ses_b"}})
        assert not error and notice not in text  # another session: not its notice
        assert gw.get_session(b)["sessionKey"] == b  # made on its first call

        error, text = call(client, "sessions_list", {"_sessionwatch": {"session_id": "ses_a"}})
        assert not error and text.startswith(notice), text  # A's notice rides along with A's call
        wait_until(lambda: gw.peek_system_events(a) == [], what="the notice acknowledged once the answer went out")

        sub = {"session_id": "ses_a", "agent_id": "ses_child", "cwd": str(tmp_path)}
        error, text = call(client, "session_status", {"_sessionwatch": sub})
        assert not error and "agent:acme:subagent:ses_child" in text, text  # a subagent's call: its own key
    finally:
        client.close()


def test_without_agent_the_key_takes_the_sessions_folder(tmp_path: Path, store: tuple[str, Gateway]) -> None:
    url, gw = store
    project = tmp_path / "Web App"
    project.mkdir()
    client = serve(tmp_path, url)
    try:
        named = {"session_id": "ses_1", "cwd": str(project)}
        error, text = call(client, "session_status", {"_sessionwatch": named})
        assert not error and "agent:web-app:opencode:ses_1" in text, text
    finally:
        client.close()


def test_a_bound_server_runs_as_its_key_whatever_a_call_names(tmp_path: Path, store: tuple[str, Gateway]) -> None:
    url, gw = store
    client = serve(tmp_path, url, "--session", "agent:main:main")
    try:
        error, text = call(client, "session_status", {"_sessionwatch": {"session_id": "ses_x"}})
        assert not error and "agent:main:main" in text and "ses_x" not in text, text
    finally:
        client.close()


def test_a_server_without_a_session_is_refused_beyond_a_hosts_stdio(tmp_path: Path, store: tuple[str, Gateway]) -> None:
    url, _ = store
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "CLAUDE_CODE_"))}
    for extra, args in (
        ({}, []),
        ({"SESSIONWATCH_SESSION_PER_CALL": "opencode"}, ["--transport", "http", "--port", "0"]),
    ):
        out = subprocess.run(
            [*SESSIONWATCH, "--store", url, "mcp", *args],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode == 2 and "give --session KEY" in out.stderr, out.stderr


def test_a_session_adopted_under_another_key_calls_as_that_key_as_its_hook_does(
    tmp_path: Path, store: tuple[str, Gateway]
) -> None:
    """``sessionwatch adopt opencode <id> --session KEY`` links the thread to KEY: the hook then stands for KEY,
    and so does the tool call; ``$SESSIONWATCH_SESSION`` pins one key for every call, as for the hook."""
    import time

    from sessionwatch.store.records import Link

    url, gw = store
    worker = "agent:main:worker"
    gw.put_session(worker)
    now = int(time.time() * 1000)
    gw.store.upsert_link(
        Link(worker, "main", "opencode", "gateway:local", "ses_adopted", "local", {}, {}, now, now), now
    )
    client = serve(tmp_path, url)
    try:
        error, text = call(client, "session_status", {"_sessionwatch": {"session_id": "ses_adopted"}})
        assert not error and f"Session {worker}" in text, text
        sub = {"session_id": "ses_adopted", "agent_id": "ses_kid"}
        error, text = call(client, "session_status", {"_sessionwatch": sub})
        assert not error and "Session agent:main:subagent:ses_kid" in text, text
    finally:
        client.close()
    client = serve(tmp_path, url, env_extra={"SESSIONWATCH_SESSION": "agent:main:pinned"})
    try:
        error, text = call(client, "session_status", {"_sessionwatch": {"session_id": "ses_other"}})
        assert not error and "Session agent:main:pinned" in text, text
    finally:
        client.close()
