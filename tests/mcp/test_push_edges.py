"""The push's rules at its edges, with a real ``sessionwatch mcp`` process and a real unix socket standing in
for Claude Code's inbox (the real binary's push is tests/hosts/test_push.py).

The server is started as Claude Code starts it: ``CLAUDE_CODE_MESSAGING_SOCKET`` names the inbox,
``<pid>.sock`` after the host's process (here a ``sleep`` standing in for it). Each test reads what
reached the socket: a push is never an acknowledgment and never moves a cursor; each notice is pushed
once, across a restart of the server too; ``SESSIONWATCH_PUSH=0`` pushes nothing; an inbox found gone
is dropped and makes the session, still working with that process, lost at once (its parent told once).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.procs import stop
from tests.support.waiting import wait_until

PARENT, WORKER = "agent:main:main", "agent:main:subagent:worker"
PEER, OTHER = "agent:main:peer", "agent:main:other"
PUSHED = "sessionwatch: a session you rely on has changed"
LOOKS = 3.5  # several of the pusher's looks (one a second)


class Inbox:
    """A unix socket named after a stand-in host process, collecting the lines written to it."""

    def __init__(self, folder: Path) -> None:
        self.host = subprocess.Popen(["sleep", "600"])
        self.path = folder / "cc-socks" / f"{self.host.pid}.sock"
        self.path.parent.mkdir(parents=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self.lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
            with self._lock:
                self.lines += [json.loads(line) for line in data.decode().splitlines() if line.strip()]

    def pushes(self) -> list[str]:
        with self._lock:
            return [str(m["message"]["content"]) for m in self.lines if m.get("type") == "user"]

    def gone(self) -> None:
        """The host process ends, and its socket with it."""
        self.sock.close()
        self.path.unlink()
        self.host.kill()
        self.host.wait()

    def close(self) -> None:
        if self.host.poll() is None:
            self.host.kill()
            self.host.wait()
        self.sock.close()


class World:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = f"sqlite:///{tmp / 'sw.db'}"
        self.inbox = Inbox(tmp)
        self.gw = Gateway.open(self.store, timers=False)
        self.gw.put_session(PARENT)
        assert "error" not in self.gw.call_tool("sessions_spawn", {"sessionKey": WORKER}, caller=PARENT)
        for target in (PEER, OTHER):
            self.gw.put_session(target)
            assert self.gw.watch(WORKER, target)
        # the worker's host is busy: working, with the stand-in's pid (what Claude Code's hooks report)
        self.gw.report_lifecycle(WORKER, "working", pid=self.inbox.host.pid, host="claude")
        self.server: subprocess.Popen[bytes] | None = None

    def start(self, *where: str, **env: str) -> None:
        """The session's MCP server, on the store (or ``where``: ``--gateway URL``)."""
        full = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "CLAUDE_CODE_"))},
            "XDG_STATE_HOME": str(self.tmp / "state"),
            "CLAUDE_CODE_MESSAGING_SOCKET": str(self.inbox.path),
            "CLAUDE_CODE_MESSAGING_TOKEN": "inbox-token",
            **env,
        }
        with open(self.tmp / "mcp.log", "ab") as log:  # the server keeps its own copy
            self.server = subprocess.Popen(
                [*SESSIONWATCH, *(where or ("--store", self.store)), "mcp", "--session", WORKER],
                stdin=subprocess.PIPE,  # kept open: the host's end of the wire
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=full,
            )

    def restart(self) -> None:
        assert self.server is not None
        stop(self.server)
        self.start()

    def notice_from(self, target: str) -> int:
        """A person writes into ``target``: one notice for the worker; its entry id."""
        self.gw.inbound(target, "use the 2024 brief", channel="webchat")
        entries = [e for e in self.gw.peek_system_events(WORKER) if target in e["line"]]
        assert len(entries) == 1, entries
        return int(entries[0]["id"])

    def log(self) -> str:
        path = self.tmp / "mcp.log"
        return path.read_text()[-3000:] if path.exists() else "(no log)"

    def close(self) -> None:
        if self.server is not None:
            stop(self.server)
        self.inbox.close()
        self.gw.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.close()


def test_a_push_never_acknowledges_nor_moves_a_cursor_and_comes_once_per_notice_across_a_restart(
    world: World,
) -> None:
    world.start()
    before = {c["target"]: c["lastSeen"] for c in world.gw.cursors(watcher=WORKER)}
    first = world.notice_from(PEER)
    wait_until(world.inbox.pushes, timeout=60, interval=0.1, what=f"a push; server log:\n{world.log()}")
    (text,) = world.inbox.pushes()
    assert text.startswith(PUSHED) and f"you are {WORKER}" in text
    assert world.inbox.lines[0] == {"type": "auth", "token": "inbox-token"}  # the token first, as Claude Code asks
    # the notice is still queued, and the watcher's cursor did not move
    assert [e["id"] for e in world.gw.peek_system_events(WORKER)] == [first]
    assert {c["target"]: c["lastSeen"] for c in world.gw.cursors(watcher=WORKER)} == before
    time.sleep(LOOKS)  # nothing may come within several looks: the notice was pushed already
    assert len(world.inbox.pushes()) == 1

    world.restart()  # a new server: what was pushed is remembered in the state folder
    time.sleep(LOOKS)  # the new server's looks: still nothing for the same notice
    assert len(world.inbox.pushes()) == 1, world.log()
    world.notice_from(OTHER)  # a new notice: pushed once
    wait_until(lambda: len(world.inbox.pushes()) == 2, timeout=60, interval=0.1, what="the second push")
    time.sleep(LOOKS)
    assert len(world.inbox.pushes()) == 2
    assert len(world.gw.peek_system_events(WORKER)) == 2  # both still queued


def test_push_off_pushes_nothing(world: World) -> None:
    world.start(SESSIONWATCH_PUSH="0")
    world.notice_from(PEER)
    time.sleep(LOOKS)  # nothing may come within several looks
    assert world.inbox.lines == []
    assert len(world.gw.peek_system_events(WORKER)) == 1


def test_an_inbox_found_gone_is_dropped_and_makes_the_working_session_lost_at_once(world: World) -> None:
    world.start()
    world.notice_from(PEER)
    wait_until(world.inbox.pushes, timeout=60, interval=0.1, what=f"a push; server log:\n{world.log()}")
    world.inbox.gone()  # the host process ends with its socket
    world.notice_from(OTHER)  # the next push finds nobody: the process is gone

    def lost() -> bool:
        return (world.gw.lifecycle_of(WORKER, "main") or {}).get("state") == "lost"

    # lost long before the silence limit (ten minutes): the gone inbox told it
    wait_until(lost, timeout=60, interval=0.1, what=f"the worker lost; server log:\n{world.log()}")
    kinds = [e["kind"] for e in world.gw.events_after(0, 1000) if e["sessionKey"] == WORKER]
    assert kinds.count("session_lost") == 1, kinds
    told = [e for e in world.gw.peek_system_events(PARENT) if WORKER in e["line"]]
    assert len(told) == 1, world.gw.peek_system_events(PARENT)  # its parent, once
    assert world.server is not None and world.server.poll() is None  # the server runs on; the pushing ended
    assert len(world.inbox.pushes()) == 1


def test_a_gone_inbox_of_another_process_loses_nothing(world: World) -> None:
    """The session reported a different process (a resumed host): the gone address says nothing of it."""
    stand_in = subprocess.Popen(["sleep", "600"])
    try:
        world.gw.report_lifecycle(WORKER, "working", pid=stand_in.pid, host="claude")
        world.start()
        world.inbox.gone()
        world.notice_from(PEER)
        time.sleep(LOOKS)  # the push finds the inbox gone within a look or two; nothing may change
        assert (world.gw.lifecycle_of(WORKER, "main") or {}).get("state") == "working"
    finally:
        stand_in.send_signal(signal.SIGKILL)
        stand_in.wait()


def test_through_a_gateway_a_notice_its_hook_route_handed_out_is_not_pushed(world: World) -> None:
    """The gateway answers the session's hooks (Claude Code's HTTP hooks) and keeps their answer state in
    its own folder, not on the host's machine. A notice its hook route handed to the session is the
    session's: the server, reading through that gateway, asks it and does not push it (which would start
    a turn for what the session has); a notice nobody handed out is pushed, once."""
    import httpx

    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.waiting import wait_http

    sock = listening_socket()
    url = url_of(sock)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    env["XDG_STATE_HOME"] = str(world.tmp / "gateway-state")  # the gateway's own folder
    gateway = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", world.store, "--no-monitor"], sock, stderr=subprocess.DEVNULL, env=env
    )
    try:
        wait_http(f"{url}/v1/health", gateway, timeout=60)
        handed = world.notice_from(PEER)
        hook = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": str(world.tmp), "prompt": "go"}
        answer = httpx.post(f"{url}/v1/sessions/{WORKER}/hooks/claude-code", json=hook, timeout=30).json()
        assert PEER in answer["hookSpecificOutput"]["additionalContext"]  # handed to the session, not acked yet
        assert httpx.get(f"{url}/v1/sessions/{WORKER}/hooks/handed-out", timeout=30).json() == {"ids": [handed]}
        world.start("--gateway", url)
        time.sleep(LOOKS)  # several looks: nothing may be pushed for what the session has
        assert world.inbox.lines == [], world.log()
        world.notice_from(OTHER)  # nobody handed this one out: pushed once
        wait_until(world.inbox.pushes, timeout=60, interval=0.1, what=f"a push; server log:\n{world.log()}")
        time.sleep(LOOKS)
        assert len(world.inbox.pushes()) == 1
        assert {e["id"] for e in world.gw.peek_system_events(WORKER)} >= {handed}  # nothing acknowledged by a push
    finally:
        stop(gateway)
