"""``sessionwatch mcp`` answers a host's opening without the MCP SDK, with exactly the SDK's answers, and
loads the SDK only when a request needs it.

The hosts do not wait long for a server's tools (Claude Code and Codex both start the model request
without a server that is slow to list them), and importing the SDK alone takes half a second. The
quick start answers ``initialize`` / ``server/discover`` / ``tools/list`` / ``resources/list`` and a
listen for list changes from a table captured from the SDK itself; these tests hold the table to the
installed SDK, the hand-over to the SDK to "every request answered exactly once", and a session that
calls no tool to never loading it. The start-up time and CPU are benchmark rows (``--only mcp``), not tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from sessionwatch.mcpserver import capture
from sessionwatch.mcpserver.handshake import SUBSCRIPTION_ID, TABLE, Handshake
from tests.support.commands import SESSIONWATCH

# The first requests of the pinned hosts, as they sent them to a real server (tests/hosts pins them).
CLAUDE_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {
        "name": "claude-code",
        "title": "Claude Code",
        "version": "2.1.332",
        "description": "Anthropic's agentic coding tool",
        "websiteUrl": "https://claude.com/claude-code",
    },
    "io.modelcontextprotocol/clientCapabilities": {
        "roots": {"listChanged": True},
        "elicitation": {"form": {}, "url": {}},
    },
}
CLAUDE_CODE = [  # in the order Claude Code 2.1.332 sends them to a server it starts
    {"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover", "params": {"_meta": CLAUDE_META}},
    {
        "jsonrpc": "2.0",
        "id": "listen:0",
        "method": "subscriptions/listen",
        "params": {"_meta": CLAUDE_META, "notifications": {"toolsListChanged": True, "resourcesListChanged": True}},
    },
    {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": CLAUDE_META}},
    {"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": CLAUDE_META}},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": CLAUDE_META}},
]
CODEX = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"codex/auth-change": {}}, "elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.171.0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"progressToken": 0}}},
]
ODD_KEY = "agent:ops:worker/ä#1"  # percent-encoded in the resource URI, raw in the instructions


def test_the_committed_table_is_what_the_installed_sdk_answers() -> None:
    fresh = capture.render(capture.capture())
    assert TABLE.read_text(encoding="utf-8") == fresh, (
        "src/sessionwatch/mcpserver/handshake.json is stale: run `python -m sessionwatch.mcpserver.capture --write`"
    )


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_each_quick_answer_is_the_sdks_answer_to_the_hosts_own_requests(host: str) -> None:
    messages = CLAUDE_CODE if host == "claude-code" else CODEX
    # a listen's answer is its acknowledgement (a notification naming the listen's id); its stream stays open
    sdk = {
        r.get("id", r.get("params", {}).get("_meta", {}).get(SUBSCRIPTION_ID)): r
        for r in capture.exchange(messages, session_key=ODD_KEY)
    }
    quick = Handshake(ODD_KEY)
    quick.bind(lambda: ODD_KEY)  # the store open, the session bound (resources/list waits for that)
    answered = [quick.answer(m) for m in messages]
    for message, answer in zip(messages, answered, strict=True):
        if "id" not in message:
            assert answer is None  # a notification is the SDK's
            continue
        assert answer is not None, f"the quick start left {message['method']} to the SDK"
        assert answer == sdk[message["id"]], message["method"]


def test_requests_the_table_does_not_cover_wait_for_the_sdk() -> None:
    quick = Handshake("agent:main:main")
    init = dict(CODEX[0], params={**CODEX[0]["params"], "protocolVersion": "2099-01-01"})
    assert quick.answer(init) is None  # an unknown version: the SDK negotiates
    assert quick.answer({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}) is None  # no version agreed yet
    assert quick.answer(CODEX[0]) is not None
    assert quick.answer({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"cursor": "x"}}) is None
    assert quick.answer({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}) is None
    listen = CLAUDE_CODE[1]
    named = {**listen["params"], "notifications": {"resourceSubscriptions": ["sessionwatch://sessions/x/notices"]}}
    assert quick.answer({**listen, "params": named}) is None  # the notices feed counts those streams
    assert quick.answer({**listen, "params": {**listen["params"], "cursor": "x"}}) is None
    assert quick.answer(CLAUDE_CODE[3]) is None and quick.waits(CLAUDE_CODE[3])  # resources: once bound
    quick.bind(lambda: "agent:main:main")
    assert not quick.waits(CLAUDE_CODE[3])
    assert (
        quick.answer(CLAUDE_CODE[3])["result"]["resources"][0]["uri"]
        == "sessionwatch://sessions/agent:main:main/notices"
    )


class _Server:
    """``sessionwatch mcp`` as a host runs it: lines in, lines out, stderr kept."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*SESSIONWATCH, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> tuple[int, list[dict[str, Any]], str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code, [json.loads(line) for line in self.lines], self.proc.stderr.read().decode()


@pytest.mark.parametrize("quick", ["1", "0"])
def test_every_request_is_answered_exactly_once_across_the_hand_over(tmp_path: Path, quick: str) -> None:
    """Handshake, a tool call held until the SDK is up, a listing, a ping: one answer each, the same with
    the quick start switched off; the replayed initialize is never seen by the client."""
    server = _Server(
        "--store",
        f"sqlite:///{tmp_path}/s.db",
        "mcp",
        "--session",
        "agent:main:main",
        env={"SESSIONWATCH_MCP_QUICKSTART": quick},
    )
    for message in CODEX:
        server.send(message)
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "session_status", "arguments": {"sessionKey": "agent:main:main"}},
        }
    )
    server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    server.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})

    def answered() -> set[Any]:
        return {json.loads(line).get("id") for line in list(server.lines)}

    from tests.support.waiting import wait_until

    wait_until(lambda: {0, 1, 2, 3, 4} <= answered(), timeout=60, what="every answer")
    code, out, err = server.finish()
    assert code == 0, err
    ids = [m.get("id") for m in out]
    assert sorted(ids) == [0, 1, 2, 3, 4], out  # nothing twice, nothing of ours
    by_id = {m["id"]: m for m in out}
    assert by_id[0]["result"]["protocolVersion"] == "2025-06-18"
    assert [t["name"] for t in by_id[1]["result"]["tools"]] == [t["name"] for t in by_id[3]["result"]["tools"]]
    assert by_id[2]["result"]["structuredContent"]["sessionKey"] == "agent:main:main"
    assert by_id[4]["result"] == {}


def test_a_start_that_fails_says_why_on_stderr_and_leaves_stdout_clean(tmp_path: Path) -> None:
    server = _Server("--gateway", "http://127.0.0.1:9", "mcp", "--session", "agent:main:main")
    server.send(CODEX[0])
    code, out, err = server.finish()
    assert code != 0
    assert "error (" in err and "127.0.0.1:9" in err, err
    assert all(m.get("id") == 0 for m in out)  # at most the handshake answer: never a stray line


def test_a_session_that_calls_no_tool_never_loads_the_sdk_and_one_that_does_gets_one_ack(tmp_path: Path) -> None:
    """Claude Code's start (discover, a listen for list changes, resources, tools) is answered without the SDK; a
    client that then goes away leaves having never loaded it; a tool call after the same start loads it,
    and the listen still has exactly one acknowledgement (the SDK never acknowledges it again)."""
    store = f"sqlite:///{tmp_path}/s.db"
    start = ("--store", store, "--log-level", "debug", "mcp", "--session", "agent:main:main")
    from tests.support.waiting import wait_until

    idle = _Server(*start)
    for message in CLAUDE_CODE:
        idle.send(message)
    wait_until(lambda: len(idle.lines) >= 5, timeout=60, what="the start answered")
    code, out, err = idle.finish()
    assert code == 0, err
    answered = [m.get("id", m.get("method")) for m in out]
    assert sorted(map(str, answered)) == sorted(
        ["server-discover-probe-1", "notifications/subscriptions/acknowledged", "0", "1", "2"]
    ), out
    (listed,) = [m for m in out if m.get("id") == 1]
    assert [r["uri"] for r in listed["result"]["resources"]] == ["sessionwatch://sessions/agent:main:main/notices"]
    assert "the MCP SDK was never needed" in err, err

    busy = _Server(*start)
    for message in CLAUDE_CODE:
        busy.send(message)
    call = {"name": "session_status", "arguments": {"sessionKey": "agent:main:main"}, "_meta": CLAUDE_META}
    busy.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
    wait_until(
        lambda: any(b'"id":3' in line.replace(b" ", b"") for line in list(busy.lines)),
        timeout=60,
        what="the call answered",
    )
    code, out, err = busy.finish()
    assert code == 0, err
    acks = [m for m in out if m.get("method") == "notifications/subscriptions/acknowledged"]
    assert len(acks) == 1 and acks[0]["params"]["_meta"][SUBSCRIPTION_ID] == "listen:0", out
    (answer,) = [m for m in out if m.get("id") == 3]
    assert answer["result"]["structuredContent"]["sessionKey"] == "agent:main:main", answer
    assert "the MCP SDK was never needed" not in err
