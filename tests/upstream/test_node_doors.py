"""Closed doors of ``sessionwatch node`` (issue 9): Host/Origin/Content-Type, slow clients, weak tokens,
and one rule for what it lists and what it serves. The node runs as a real subprocess on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sessionwatch.node_server import create_node_app
from sessionwatch.upstream.catalogs import LocalCatalog
from tests.support.ports import ServerThread, listening_socket, port_of, refusing_port, spawn_serving, url_of
from tests.support.waiting import wait_http

from .writers import ClaudeTranscript

TOKEN = "node-doors-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    return {**env, **(extra or {})}


class NodeProcess:
    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None, token: bool = True) -> None:
        sock = listening_socket()  # the node serves it (--fd): no port race
        self.port, self.url = port_of(sock), url_of(sock)
        (root / "claude" / "projects").mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "sessionwatch.node_server",
            "--claude-root",
            str(root / "claude"),
            "--codex-root",
            str(root / "codex"),
            *args,
        ]
        if token:
            cmd += ["--token", TOKEN]
        self.proc = spawn_serving(cmd, sock, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(env))
        wait_http(self.url + "/v1/node/health", self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator:
    started: list[NodeProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, token: bool = True) -> NodeProcess:
        node = NodeProcess(tmp_path, *args, env=env, token=token)
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()


def test_node_refuses_a_foreign_host_a_page_origin_and_a_non_json_body(start_node) -> None:
    node = start_node()
    res = httpx.get(node.url + "/v1/node/threads", headers={**AUTH, "Host": f"rebind.evil.example:{node.port}"})
    assert res.status_code == 421 and res.json()["error"]["code"] == "forbidden", res.text
    res = httpx.get(node.url + "/v1/node/health", headers={"Host": "rebind.evil.example"})
    assert res.status_code == 421
    res = httpx.get(node.url + "/v1/node/threads", headers={**AUTH, "Origin": "https://evil.example"})
    assert res.status_code == 403 and res.json()["error"]["code"] == "forbidden", res.text
    res = httpx.post(node.url + "/v1/node/threads", headers={**AUTH, "Content-Type": "text/plain"}, content="x")
    assert res.status_code == 415, res.text
    for host in (f"localhost:{node.port}", f"127.0.0.1:{node.port}"):
        assert httpx.get(node.url + "/v1/node/threads", headers={**AUTH, "Host": host}).status_code == 200


def test_node_accepts_a_configured_name(start_node) -> None:
    node = start_node("--allowed-host", "laptop.lan", env={"SESSIONWATCH_ALLOWED_ORIGINS": "https://ops.example"})
    assert httpx.get(node.url + "/v1/node/threads", headers={**AUTH, "Host": "laptop.lan:8765"}).status_code == 200
    res = httpx.get(node.url + "/v1/node/threads", headers={**AUTH, "Origin": "https://ops.example"})
    assert res.status_code == 200


def test_node_sheds_slow_connections_and_times_them_out(start_node) -> None:
    node = start_node("--max-connections", "20", "--header-timeout", "1")
    socks = []
    try:
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=5)
            s.sendall(b"GET /v1/node/threads HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        # Accept is FIFO: once this answers, all 60 slow connections have been accepted (and some shed).
        assert httpx.get(node.url + "/v1/node/threads", headers=AUTH, timeout=10).status_code == 200
        started = time.perf_counter()
        res = httpx.get(node.url + "/v1/node/threads", headers=AUTH, timeout=5)
        assert res.status_code == 200 and time.perf_counter() - started < 1.0
        # The newest slow ones are still open until the header timeout ends them with a 408.
        last = socks[-1]
        last.settimeout(5)
        assert last.recv(4096).startswith(b"HTTP/1.1 408")
    finally:
        for s in socks:
            s.close()


def test_node_token_rules_and_token_file(start_node, tmp_path: Path) -> None:
    # Refused before binding: the port stays held by this test, so a node that bound anyway would fail
    # to listen (a different message) rather than serve.
    with refusing_port() as port:
        for weak in ("x", " ", "short-token", "has spaces but is long enough"):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "sessionwatch.node_server",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    str(port),
                    "--token",
                    weak,
                ],
                capture_output=True,
                text=True,
                timeout=30,
                env=_env(),
            )
            assert proc.returncode == 2 and "forbidden" in proc.stderr, (weak, proc.stderr)
        proc = subprocess.run(
            [sys.executable, "-m", "sessionwatch.node_server", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            env=_env(),
        )
        assert proc.returncode == 2 and "needs a token" in proc.stderr, proc.stderr
    secret = tmp_path / "node-token"
    secret.write_text(TOKEN + "\n")
    node = start_node("--token-file", str(secret), token=False)
    assert httpx.get(node.url + "/v1/node/threads").status_code == 401
    assert httpx.get(node.url + "/v1/node/threads", headers=AUTH).status_code == 200
    assert TOKEN not in Path(f"/proc/{node.proc.pid}/cmdline").read_bytes().decode()


# -- 4. the node serves only what it lists ---------------------------------------------------------------


def test_node_serves_only_what_it_lists(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    (claude / "projects").mkdir(parents=True)
    main = ClaudeTranscript(claude, session_id="11111111-1111-4111-8111-111111111111")
    main.prompt("the parent session's prompt")
    main.assistant("ok")
    project = main.path.parent
    sub = project / "agent-3f2a9c1b.jsonl"  # a sub-agent transcript beside its parent
    sub.write_bytes(main.path.read_bytes())
    odd = project / "a..b.jsonl"  # a name the thread-id rule refuses
    odd.write_bytes(main.path.read_bytes())
    app = create_node_app(TOKEN, claude_root=str(claude), codex_root=str(tmp_path / "codex"))
    with ServerThread(app) as node:
        listed = {t["threadId"] for t in httpx.get(node.url + "/v1/node/threads", headers=AUTH).json()["threads"]}
        assert listed == {main.session_id}
        served = httpx.get(f"{node.url}/v1/node/threads/claude/{main.session_id}/items", headers=AUTH)
        assert served.status_code == 200
        res = httpx.get(f"{node.url}/v1/node/threads/claude/agent-3f2a9c1b/items", headers=AUTH)
        assert res.status_code == 404 and res.json()["error"]["code"] == "thread_not_found", res.text
    # The gateway's local catalog follows the same rule.
    cat = LocalCatalog("claude", claude)
    assert cat.locate("agent-3f2a9c1b") is None and not cat.exists("agent-3f2a9c1b")
    assert [t["threadId"] for t in cat.list_threads()] == [main.session_id]
