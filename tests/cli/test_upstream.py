"""Upstream commands through the installed CLI: a real Claude transcript folder, a real node process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import listening_socket, spawn_serving, url_of
from tests.support.procs import stop
from tests.support.waiting import wait_http

from .conftest import SESSIONWATCH, Result, clean_env

MAIN = "agent:main:main"
CC = "agent:main:subagent:cc"
THREAD = "3f6d2c1a-8e4b-4b7e-9c2d-7a1e5f0b9c44"


def _typed(uuid: str, text: str, ts: str) -> str:
    return (
        json.dumps(
            {
                "parentUuid": None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/dev/acme",
                "sessionId": THREAD,
                "version": "2.1.310",
                "entrypoint": "cli",
                "type": "user",
                "message": {"role": "user", "content": text},
                "uuid": uuid,
                "timestamp": ts,
                "promptSource": "typed",
                "permissionMode": "default",
            }
        )
        + "\n"
    )


@pytest.fixture
def claude_root(tmp_path: Path) -> Path:
    root = tmp_path / "claude"
    project = root / "projects" / "-home-dev-acme"
    project.mkdir(parents=True)
    (project / f"{THREAD}.jsonl").write_text(
        _typed("a41e9c3b-6f2d-4e8a-b1c7-2d9f0e3a5b66", "The retry test is flaky again", "2026-01-20T14:03:12.481Z")
    )
    return root


def _run(store: str, root: Path, *args: str) -> Result:
    return Result(
        subprocess.run(
            [*SESSIONWATCH, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(SESSIONWATCH_STORE=store, CLAUDE_CONFIG_DIR=str(root), CODEX_HOME=str(root.parent / "codex")),
        )
    )


@pytest.mark.slow
def test_adopt_a_thread_and_a_tick_notices_a_person_typing(store: str, claude_root: Path) -> None:
    threads = _run(store, claude_root, "threads", "claude", "--json")
    assert threads.code == 0, threads
    assert [t["threadId"] for t in threads.json()["threads"]] == [THREAD]
    assert THREAD in _run(store, claude_root, "threads", "claude").out

    assert _run(store, claude_root, "put", MAIN).code == 0
    adopted = _run(store, claude_root, "adopt", "claude", THREAD, "--session", CC, "--json")
    assert adopted.code == 0 and adopted.json()["sessionKey"] == CC, adopted
    assert _run(store, claude_root, "link", CC, "--json").json()["threadId"] == THREAD
    assert _run(store, claude_root, "watch", CC, "--as", MAIN).code == 0

    quiet = _run(store, claude_root, "tick", "--json").json()
    assert [x["status"] for x in quiet["links"]] == ["unchanged"]

    with open(claude_root / "projects" / "-home-dev-acme" / f"{THREAD}.jsonl", "a") as f:
        f.write(_typed("b41e9c3b-6f2d-4e8a-b1c7-2d9f0e3a5b67", "Also check the jitter", "2026-01-20T14:05:12.481Z"))
    tick = _run(store, claude_root, "tick")
    assert tick.code == 0 and "recorded" in tick.out, tick
    notice = _run(store, claude_root, "drain", MAIN)
    assert f'Session "{CC}" changed (other actor)' in notice.out

    local = _run(store, claude_root, "upstream-results")
    assert local.code == 0 and "runs no monitor" in local.out


def test_upstream_errors(store: str, claude_root: Path) -> None:
    _run(store, claude_root, "put", MAIN)
    assert _run(store, claude_root, "link", MAIN).code == 3
    assert _run(store, claude_root, "threads", "gemini").code == 3  # unknown catalog: not_found
    assert _run(store, claude_root, "adopt", "claude", "00000000-0000-0000-0000-000000000000").code == 3


@pytest.fixture
def node(claude_root: Path) -> Iterator[tuple[str, str]]:
    sock, token = listening_socket(), "node-test-token"  # the node serves it (--fd): no port race
    url = url_of(sock)
    proc = spawn_serving(
        [*SESSIONWATCH, "node", "--token", token, "--claude-root", str(claude_root)],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    try:
        wait_http(f"{url}/v1/node/health", proc)
        yield url, token
    finally:
        stop(proc)


@pytest.mark.slow
def test_node_and_pair(store: str, tmp_path: Path, node: tuple[str, str]) -> None:
    url, token = node
    elsewhere = tmp_path / "empty-claude"  # the gateway machine has no transcripts of its own
    elsewhere.mkdir()
    paired = _run(store, elsewhere, "pair", "laptop", url, "--token", token, "--json")
    assert paired.code == 0, paired
    assert paired.json()["nodeId"] == "laptop" and token not in paired.out
    listed = _run(store, elsewhere, "threads", "node:laptop", "--json").json()["threads"]
    assert [(t["threadId"], t["hostId"]) for t in listed] == [(THREAD, "node:laptop")]
    # The node is asked at once: its 401 is unauthorized (exit 4) and the working pairing stays.
    refused = _run(store, elsewhere, "pair", "laptop", url, "--token", "wrong", "--json")
    assert refused.code == 4, refused
    assert refused.json()["error"]["code"] == "unauthorized" and "wrong" not in refused.out
    assert _run(store, elsewhere, "threads", "node:laptop").code == 0
