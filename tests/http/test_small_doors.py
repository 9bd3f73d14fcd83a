"""Small doors that add up (issue 19, item 7), each against real servers on loopback.

- a request with two ``Authorization`` headers is refused (400) by the gateway, the MCP transport and the
  node, whichever copy would have passed (raw sockets: an HTTP client may merge the two);
- media types are case-insensitive on the MCP transport (``APPLICATION/JSON`` is JSON);
- a scoped token sees only its own agents' figures in ``/v1/ui/health`` and ``/v1/health``;
- ``sessionwatch serve`` and ``python -m sessionwatch.http`` take the same options and variables;
- a failure repeated by every request is logged once with its traceback, then counted.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from sessionwatch.node_server import create_node_app
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token
from tests.mcp.helpers import mcp_http_server
from tests.support.commands import SESSIONWATCH
from tests.support.ports import ServerThread, listening_socket, port_of, spawn_serving
from tests.support.waiting import wait_until

from .sse_reader import SSEReader

ADMIN = "small-doors-admin-token-0123456789"


def _tokens(store_url: str, *agents: str) -> dict[str, str]:
    store = open_store(store_url)
    try:
        return {agent: create_token(store, agents=[agent])[0] for agent in agents}
    finally:
        store.close()


def _raw(port: int, head: str, body: bytes = b"") -> tuple[int, dict]:
    """Send one request as written (repeated headers stay repeated) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        sized = re.search(rb"(?i)content-length: *(\d+)", header)
        if sized is None:  # a stream (the MCP transport answers in SSE): the status is what counts here
            return int(header.split(b" ", 2)[1]), {}
        length = int(sized.group(1))
        while len(rest) < length:
            rest += s.recv(65536)
    return int(header.split(b" ", 2)[1]), json.loads(rest[:length] or b"{}")


def _two_authorizations(first: str, second: str) -> str:
    return f"Authorization: Bearer {first}\nAuthorization: Bearer {second}\n"


# -- two Authorization headers ----------------------------------------------------------------------------


def test_two_authorization_headers_are_refused_by_the_gateway(gateway_factory, tmp_path: Path) -> None:
    gp = gateway_factory(token=ADMIN).start()
    tok = _tokens(gp.store_url, "a", "b")
    own = "agent:a:main"
    assert httpx.put(f"{gp.url}/v1/sessions/{own}", json={}, headers=gp.headers()).status_code == 200
    host = f"Host: 127.0.0.1:{gp.port}\n"
    for first, second in ((tok["b"], tok["a"]), (tok["a"], tok["b"]), (tok["a"], tok["a"])):
        status, body = _raw(gp.port, f"GET /v1/sessions/{own} HTTP/1.1\n{host}{_two_authorizations(first, second)}")
        assert (status, body["error"]["code"]) == (400, "invalid_argument"), body
        assert "one Authorization header" in body["error"]["message"]
    # health needs no token, but two of them are still two
    status, _ = _raw(gp.port, f"GET /v1/health HTTP/1.1\n{host}{_two_authorizations(tok['a'], ADMIN)}")
    assert status == 400
    status, _ = _raw(gp.port, f"GET /v1/sessions/{own} HTTP/1.1\n{host}Authorization: Bearer {tok['a']}\n")
    assert status == 200  # one header: served as before


@pytest.mark.slow
def test_two_authorization_headers_are_refused_by_the_mcp_transport(sqlite_url: str) -> None:
    tok = _tokens(sqlite_url, "main", "oth")
    with mcp_http_server(sqlite_url, "--http-token", ADMIN) as (url, _):
        port = int(url.split(":")[2].split("/")[0])
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ).encode()
        common = (
            f"Host: 127.0.0.1:{port}\nContent-Type: application/json\nAccept: application/json, text/event-stream\n"
            f"Content-Length: {len(body)}\n"
        )
        # B then A: the SDK's own header handling kept the last copy (served as A); the gateway the first
        for first, second in ((tok["oth"], tok["main"]), (tok["main"], tok["oth"])):
            status, answer = _raw(port, f"POST /mcp HTTP/1.1\n{common}{_two_authorizations(first, second)}", body)
            assert (status, answer["error"]["code"]) == (400, "invalid_argument"), answer
        status, _ = _raw(port, f"POST /mcp HTTP/1.1\n{common}Authorization: Bearer {tok['main']}\n", body)
        assert status == 200


def test_two_authorization_headers_are_refused_by_the_node(tmp_path: Path) -> None:
    token = "node-small-doors-token-0123456789"
    (tmp_path / "claude" / "projects").mkdir(parents=True)
    app = create_node_app(token, claude_root=str(tmp_path / "claude"), codex_root=str(tmp_path / "codex"))
    with ServerThread(app) as srv:
        host = f"Host: 127.0.0.1:{srv.port}\n"
        status, answer = _raw(srv.port, f"GET /v1/node/threads HTTP/1.1\n{host}{_two_authorizations(token, 'x' * 20)}")
        assert (status, answer["error"]["code"]) == (400, "invalid_argument"), answer
        status, _ = _raw(srv.port, f"GET /v1/node/threads HTTP/1.1\n{host}Authorization: Bearer {token}\n")
        assert status == 200


# -- media types are case-insensitive ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_mcp_transport_takes_json_in_any_case(sqlite_url: str) -> None:
    with mcp_http_server(sqlite_url, "--http-token", ADMIN) as (url, _):
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        for media in ("APPLICATION/JSON", "Application/Json; Charset=UTF-8", "application/json"):
            res = httpx.post(
                url,
                content=json.dumps(init),
                headers={
                    "Authorization": f"Bearer {ADMIN}",
                    "Content-Type": media,
                    "Accept": "application/json, text/event-stream",
                },
                timeout=10,
            )
            assert res.status_code == 200, (media, res.status_code, res.text)
            assert res.headers.get("mcp-session-id")
        res = httpx.post(url, content=b"{}", headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "TEXT/PLAIN"})
        assert res.status_code == 415  # still not JSON


# -- a scoped token's figures are about its own agents ------------------------------------------------------


needs_prlimit = pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="resource.prlimit is Linux-only")


def _limit_writes(pid: int, limit: int | None) -> None:
    """Make every file write of ``pid`` beyond ``limit`` bytes fail for real (EFBIG), or lift that again.

    Only the soft limit moves, so lifting it needs no privilege; the store's next write fails as on a full disk."""
    _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY if limit is None else limit, hard))


@needs_prlimit
def test_a_scoped_token_sees_only_its_own_agents_figures(gateway_factory) -> None:
    gp = gateway_factory(token=ADMIN).start()
    tok = _tokens(gp.store_url, "a", "b")
    admin = httpx.Client(base_url=gp.url, headers=gp.headers(), timeout=10)
    as_a = {"Authorization": f"Bearer {tok['a']}"}
    admin.put("/v1/sessions/agent:a:main", json={}).raise_for_status()
    mine = admin.post("/v1/sessions/agent:a:main/goal", json={"action": "create", "objective": "a's"}).json()
    own_last = mine["event"]["sequence"]
    # Agent b is busy: events after a's, an open wake stream, recordings the store refused.
    for key in ("agent:b:main", "agent:b:kid"):
        admin.put(f"/v1/sessions/{key}", json={}).raise_for_status()
    admin.post("/v1/watch", json={"watcher": "agent:b:main", "target": "agent:b:kid"}).raise_for_status()
    for i in range(3):
        admin.post("/v1/sessions/agent:b:kid/goal", json={"action": "create", "objective": f"b {i}"}).raise_for_status()
    reader = SSEReader(gp.url, "agent:b:main", headers={"Authorization": f"Bearer {tok['b']}"}).start()
    assert gp.proc is not None
    _limit_writes(gp.proc.pid, 4096)
    try:
        for i in range(2):
            res = admin.post("/v1/sessions/agent:b:kid/inbound", json={"text": f"hi {i}", "channel": "chat"})
            assert res.status_code == 200 and res.json()["recorded"] is False, res.text
    finally:
        _limit_writes(gp.proc.pid, None)
    try:
        everything = admin.get("/v1/ui/health").json()
        assert everything["log"]["last"] > own_last and everything["streams"] >= 1
        assert everything["droppedRecordings"]["total"] >= 2 and everything["sweep"]["swept"] is not None

        seen = httpx.get(f"{gp.url}/v1/ui/health", headers=as_a, timeout=10).json()
        assert seen["log"]["last"] == own_last  # a's newest event, not the log's head
        assert seen["streams"] == 0
        assert seen["droppedRecordings"] == {"total": 0, "byCause": {}}
        assert seen["sweep"]["swept"] is None

        probe = httpx.get(f"{gp.url}/v1/health", headers=as_a, timeout=10).json()
        assert probe["status"] == "ok" and probe["streams"] == 0 and probe["droppedRecordings"]["total"] == 0
        assert "swept" not in probe
        anonymous = httpx.get(f"{gp.url}/v1/health", timeout=10).json()
        assert anonymous["status"] == "ok"
        assert not {"streams", "droppedRecordings", "swept"} & set(anonymous)
        full = admin.get("/v1/health").json()
        assert full["streams"] >= 1 and full["droppedRecordings"]["total"] >= 2
        # b's own token sees b's figures
        as_b = httpx.get(f"{gp.url}/v1/ui/health", headers={"Authorization": f"Bearer {tok['b']}"}).json()
        assert as_b["streams"] == 1 and as_b["droppedRecordings"]["total"] == 2
        assert as_b["log"]["last"] == everything["log"]["last"]
    finally:
        reader.close()
        admin.close()


# -- one set of options for every way of starting the gateway -----------------------------------------------

ENTRIES = {"cli": [*SESSIONWATCH, "serve"], "module": [sys.executable, "-m", "sessionwatch.http"]}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    return {**env, **extra}


class Served:
    """One gateway started through ``entry`` with ``args``, its stderr in a file."""

    def __init__(self, entry: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.sock = listening_socket()
        self.url = f"http://127.0.0.1:{port_of(self.sock)}"
        self.log = log
        with open(log, "wb") as out:
            self.proc = spawn_serving(
                [*ENTRIES[entry], *args], self.sock, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        wait_until(lambda: self._ready(), timeout=30, what="the gateway's health")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the gateway exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        return httpx.get(self.url + "/v1/health", timeout=5).status_code == 200

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(20)
        return self.log.read_text()


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_every_entry_point_takes_every_option(entry: str, tmp_path: Path) -> None:
    store = ["--store", f"sqlite:///{tmp_path}/s.db", "--no-monitor"]
    gw = Served(
        entry,
        [*store, "--no-access-log", "--max-body-bytes", "2000", "--keepalive", "0.3", "--max-token-streams", "3"],
        tmp_path / "a.log",
        _env(),
    )
    try:
        assert httpx.put(f"{gw.url}/v1/sessions/agent:a:main", json={}).status_code == 200
        big = httpx.post(f"{gw.url}/v1/sessions/agent:a:main/inbound", json={"text": "x" * 3000, "channel": "c"})
        assert big.status_code == 413 and "2000 bytes" in big.json()["error"]["message"]
        reader = SSEReader(gw.url, "agent:a:main").start()
        wait_until(lambda: len([c for c in reader.comments if "keep-alive" in c]) >= 2, timeout=10, what="keep-alives")
        reader.close()
    finally:
        log = gw.stop()
    assert '"path"' not in log and "/v1/sessions" not in log, log[-2000:]  # --no-access-log

    # SESSIONWATCH_ACCESS_LOG=0 does the same, and without it every request gets its JSON line
    quiet = Served(entry, store, tmp_path / "b.log", _env(SESSIONWATCH_ACCESS_LOG="0"))
    httpx.get(f"{quiet.url}/v1/sessions/agent:a:main").raise_for_status()
    assert "/v1/sessions/agent:a:main" not in quiet.stop()
    loud = Served(entry, store, tmp_path / "c.log", _env())
    httpx.get(f"{loud.url}/v1/sessions/agent:a:main").raise_for_status()
    assert '"path": "/v1/sessions/agent:a:main"' in loud.stop()


def test_both_entry_points_list_the_same_options() -> None:
    def options(argv: list[str]) -> set[str]:
        out = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60, env=_env(COLUMNS="200"))
        assert out.returncode == 0, out.stderr
        return set(re.findall(r"(?m)^\s+(--[a-z][a-z0-9-]*)", out.stdout))

    cli, module = options(ENTRIES["cli"]), options(ENTRIES["module"])
    assert cli - {"--json"} == module  # --json: every sessionwatch command has it
    assert {"--access-log", "--max-body-bytes", "--keepalive", "--max-token-streams", "--revocation-poll"} <= module


# -- a repeated failure is logged once, with a count ---------------------------------------------------------


@needs_prlimit
def test_a_failure_every_request_repeats_is_logged_once_with_a_count(tmp_path: Path) -> None:
    sock = listening_socket()
    url = f"http://127.0.0.1:{port_of(sock)}"
    proc = spawn_serving(
        [sys.executable, "-m", "sessionwatch.http", "--store", f"sqlite:///{tmp_path}/s.db", "--no-monitor"],
        sock,
        stdout=subprocess.PIPE,  # a pipe: the write limit below must not hit the log itself
        stderr=subprocess.STDOUT,
        env=_env(SESSIONWATCH_ACCESS_LOG="0", SESSIONWATCH_LOG_LEVEL="warning"),
    )
    lines: list[str] = []
    assert proc.stdout is not None
    pump = threading.Thread(target=lambda: lines.extend(x.decode(errors="replace") for x in proc.stdout), daemon=True)  # type: ignore[union-attr]
    pump.start()
    try:
        wait_until(lambda: httpx.get(url + "/v1/health", timeout=5).status_code == 200, timeout=30, what="health")
        with httpx.Client(base_url=url, timeout=30) as http:
            for key in ("agent:a:main", "agent:a:kid"):
                http.put(f"/v1/sessions/{key}", json={}).raise_for_status()
            http.post("/v1/watch", json={"watcher": "agent:a:main", "target": "agent:a:kid"}).raise_for_status()
            before = len(lines)
            _limit_writes(proc.pid, 4096)  # from here on every write of the store fails, as on a full disk
            statuses: dict[int, int] = {}
            for i in range(60):
                for res in (
                    http.put(f"/v1/sessions/agent:a:new{i}", json={}),
                    http.post("/v1/sessions/agent:a:kid/inbound", json={"text": f"t{i}", "channel": "chat"}),
                ):
                    statuses[res.status_code] = statuses.get(res.status_code, 0) + 1
            _limit_writes(proc.pid, None)
            assert statuses == {503: 60, 200: 60}, statuses  # the failures are real: the puts fail, the turns degrade
            during = lines[before:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        pump.join(10)
    tracebacks = sum(1 for line in during if line.startswith("Traceback"))
    # three failures, each logged once with its traceback: the put, the turn's transcript, its recording
    assert tracebacks == 3, "".join(during)[-4000:]
    assert len(during) < 150, len(during)  # before: 180 tracebacks, 3,360 lines
    summaries = [line for line in lines if "more times" in line]
    counts = {
        m.group(1): int(m.group(2))
        for line in summaries
        if (m := re.search(r"(\w+ failed).*?repeated (\d+) more", line))
    }
    assert counts.get("put_session failed") == 59, "".join(lines)[-3000:]  # the other 59, said once at shutdown
