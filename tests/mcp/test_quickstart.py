"""``sessionwatch mcp`` answers the handshake before the MCP SDK has loaded, with exactly the SDK's answers.

The hosts do not wait long for a server's tools (Claude Code and Codex both start the model request
without a server that is slow to list them), and importing the SDK alone takes half a second. The
quick start answers ``initialize`` / ``server/discover`` / ``tools/list`` from a table captured from the
SDK itself; these tests hold the table to the installed SDK, and the hand-over to the SDK to "every
request answered exactly once". The start-up time is a benchmark row (``--only mcp_start``), not a test.
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
from sessionwatch.mcpserver.handshake import TABLE, Handshake
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
CLAUDE_CODE = [
    {"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover", "params": {"_meta": CLAUDE_META}},
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
    sdk = {r["id"]: r for r in capture.exchange(messages, session_key=ODD_KEY)}
    quick = Handshake(ODD_KEY)
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
