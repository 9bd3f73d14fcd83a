"""End to end with two real processes on loopback: a gateway (``python -m sessionwatch.http``) and a
node (``python -m sessionwatch.node_server``) serving another "machine's" Claude transcripts.

A watcher gets exactly one notice for a burst of turns a person typed into the node's thread, and
none for its own prompt coming back through that thread.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.support.ports import listening_socket, spawn_serving, url_of
from tests.support.procs import stop
from tests.support.waiting import wait_http

from .writers import ClaudeTranscript

pytestmark = pytest.mark.slow
TOKEN = "two-process-token"
WATCHER = "agent:main:main"


def spawn(args: list[str], sock: socket.socket, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``python ARGS --fd N``: the server serves ``sock``, opened by this test (no port race)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    full_env.update(env)
    with open(log, "ab") as fh:
        return spawn_serving([sys.executable, *args], sock, stdout=fh, stderr=subprocess.STDOUT, env=full_env)


@pytest.fixture
def processes(tmp_path: Path):
    node_root = tmp_path / "laptop-claude"
    (node_root / "projects").mkdir(parents=True)
    gw_root = tmp_path / "gateway-claude"
    (gw_root / "projects").mkdir(parents=True)
    node_sock, gw_sock = listening_socket(), listening_socket()
    node_url, gw_url = url_of(node_sock), url_of(gw_sock)
    node = spawn(
        [
            "-m",
            "sessionwatch.node_server",
            "--token",
            TOKEN,
            "--claude-root",
            str(node_root),
            "--codex-root",
            str(tmp_path / "laptop-codex"),
        ],
        node_sock,
        tmp_path / "node.log",
        {},
    )
    gw = spawn(
        ["-m", "sessionwatch.http", "--store", f"sqlite:///{tmp_path}/gw.db", "--no-monitor", "--log-level", "warning"],
        gw_sock,
        tmp_path / "gw.log",
        {
            "CLAUDE_CONFIG_DIR": str(gw_root),
            "CODEX_HOME": str(tmp_path / "gateway-codex"),
            "SESSIONWATCH_ACCESS_LOG": "0",
        },
    )
    try:
        wait_http(f"{node_url}/v1/node/health", node, log=tmp_path / "node.log")
        wait_http(f"{gw_url}/v1/health", gw, log=tmp_path / "gw.log")
        yield gw_url, node_url, node_root, node
    finally:
        for p in (gw, node):
            stop(p)


def test_one_notice_for_a_burst_and_none_for_our_echo(processes):
    gw_url, node_url, node_root, node_proc = processes
    http = httpx.Client(base_url=gw_url, timeout=30)
    transcript = ClaudeTranscript(node_root)
    transcript.prompt("history typed last week")
    transcript.assistant("done")

    assert http.put(f"/v1/sessions/{WATCHER}", json={}).status_code in (200, 201)
    r = http.put("/v1/nodes/laptop", json={"url": node_url, "token": TOKEN})
    assert r.status_code == 200, r.text
    threads = http.get("/v1/catalogs/claude/threads").json()["threads"]
    assert [(t["hostId"], t["threadId"]) for t in threads] == [("node:laptop", transcript.session_id)]
    r = http.post(
        f"/v1/catalogs/claude/threads/{transcript.session_id}/continue",
        json={"hostId": "node:laptop", "sessionKey": "agent:main:laptop-worker"},
    )
    assert r.status_code == 200, r.text
    adopted = r.json()
    key = adopted["sessionKey"]
    assert adopted["linked"] and adopted["link"]["hostId"] == "node:laptop"

    sent = http.post(
        "/v1/tools/sessions_send",
        headers={"X-Session-Key": WATCHER},
        json={"sessionKey": key, "message": "Run the migrations, then report back.", "watch": True},
    )
    assert sent.status_code == 200 and sent.json()["watched"] is True, sent.text
    tick = http.post("/v1/upstream/tick", json={}).json()
    assert [e["status"] for e in tick["links"]] == ["unchanged"]

    # our own prompt arrives in the node's thread (typed by the harness), then the agent works
    transcript.prompt("Run the migrations,  then report back.", source=None)
    transcript.assistant("Running them.")
    tick = http.post("/v1/upstream/tick", json={}).json()
    assert [e["status"] for e in tick["links"]] == ["advanced"]
    events_url = f"/v1/sessions/{quote(WATCHER)}/system-events"
    assert http.get(events_url).json()["entries"] == []

    # a person sits down at the laptop and types three prompts in a row
    transcript.prompt("wait, stop")
    transcript.prompt("use the staging database instead", source="queued")
    transcript.assistant("Switching to staging.")
    transcript.prompt("and keep the backup")
    tick = http.post("/v1/upstream/tick", json={}).json()
    (entry,) = tick["links"]
    assert entry["status"] == "recorded" and entry["humanTurns"] == 3
    assert http.post("/v1/upstream/tick", json={}).json()["links"][0]["status"] == "unchanged"
    assert http.get("/v1/upstream/results").json()["tick"] == tick["tick"] + 1

    notices = http.get(events_url).json()["entries"]
    assert len(notices) == 1
    assert notices[0]["text"].startswith(f'Session "{key}" changed (other actor).')
    status = http.post(
        "/v1/tools/session_status", headers={"X-Session-Key": WATCHER}, json={"sessionKey": key, "changesSince": 0}
    ).json()
    human = [e for e in status["stateChanges"]["events"] if e["kind"] == "human_direct_message"]
    assert len(human) == 1 and human[0]["payload"] == {"turns": 3}
    link = http.get(f"/v1/sessions/{quote(key)}/link").json()["link"]
    assert link["missCount"] == 0

    # the node goes away: inconclusive, never a miss
    node_proc.terminate()
    node_proc.wait(10)
    tick = http.post("/v1/upstream/tick", json={}).json()
    assert tick["links"][0]["status"] == "unchanged"
    assert http.get(f"/v1/sessions/{quote(key)}/link").json()["link"]["missCount"] == 0
