"""Bearer tokens, the loopback rule, caller checks."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from sessionwatch.errors import Forbidden
from sessionwatch.http.server import is_loopback, serve
from tests.support.ports import listening_socket, refusing_port, spawn_serving

TOKEN = "s3cret-token"


def _concrete(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: "agent:sec:main" if m.group(1) == "key" else "x", path)


def test_token_required_on_every_route_but_health(gateway_factory) -> None:
    gp = gateway_factory(token=TOKEN).start()
    good = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        assert http.get("/v1/health").status_code == 200
        doc = http.get("/v1/openapi.json", headers=good)
        assert doc.status_code == 200 and doc.json()["security"] == [{"bearer": []}]
        checked = 0
        for path, ops in doc.json()["paths"].items():
            for method in ops:
                if path.startswith("/v1/health"):  # health, health/live, health/ready need no token
                    continue
                for headers in (
                    {},
                    {"Authorization": "Bearer wrong"},
                    {"Authorization": TOKEN},
                    {"Authorization": f"Basic {TOKEN}"},
                ):
                    res = http.request(method.upper(), _concrete(path), headers=headers, json={})
                    assert res.status_code == 401, (method, path, headers, res.text)
                    assert res.json()["error"]["code"] == "unauthorized"
                    assert res.headers["www-authenticate"] == "Bearer"
                checked += 1
        assert checked > 30
        # With the token (scheme case-insensitive) the same routes answer normally.
        assert http.put("/v1/sessions/agent:sec:main", json={}, headers=good).status_code == 200
        assert http.get("/v1/sessions/agent:sec:main", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
        # Unknown routes are not an oracle for unauthenticated callers.
        assert http.get("/v1/nope").status_code == 401
        assert http.get("/v1/nope", headers=good).status_code == 404


def test_token_from_environment(gateway_factory) -> None:
    gp = gateway_factory(env={"SESSIONWATCH_TOKEN": TOKEN}).start()
    assert httpx.get(f"{gp.url}/v1/cursors").status_code == 401
    assert httpx.get(f"{gp.url}/v1/cursors", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_refuses_to_listen_beyond_loopback_without_a_token() -> None:
    with refusing_port() as port:  # held (not listening) here: a gateway that bound anyway would fail differently
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sessionwatch.http",
                "--host",
                "0.0.0.0",
                "--port",
                str(port),
                "--store",
                "sqlite:////nonexistent-dir/never-opened.db",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={k: v for k, v in __import__("os").environ.items() if k != "SESSIONWATCH_TOKEN"},
        )
        assert proc.returncode == 4  # forbidden: the exit code of `sessionwatch serve` too
        assert "forbidden" in proc.stderr and "token" in proc.stderr
        with socket.socket() as s:  # nothing listens there
            assert s.connect_ex(("127.0.0.1", port)) != 0


def test_an_inherited_socket_beyond_loopback_needs_a_token_too() -> None:
    """--fd: the socket's own address is what is exposed, whatever --host says (its default is loopback)."""
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SESSIONWATCH_")}
    proc = spawn_serving(
        [sys.executable, "-m", "sessionwatch.http", "--store", "sqlite:////nonexistent-dir/never-opened.db"],
        listening_socket("0.0.0.0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, (out, err)
    assert "forbidden" in err and "token" in err
    bad = subprocess.run(
        [sys.executable, "-m", "sessionwatch.http", "--fd", "987"], capture_output=True, text=True, timeout=30, env=env
    )
    assert bad.returncode == 2 and "--fd 987" in bad.stderr, bad.stderr


def test_serve_raises_forbidden_before_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSIONWATCH_TOKEN", raising=False)
    started = time.monotonic()
    with refusing_port() as port:
        for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
            with pytest.raises(Forbidden, match="without a token"):
                serve("sqlite:////nonexistent-dir/x.db", host=host, port=port)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    "host,expected",
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("myhost", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_acting_tools_need_an_agent_qualified_caller(http: httpx.Client) -> None:
    assert http.put("/v1/sessions/global", json={"agentId": "secg"}).status_code == 200
    bare = {"X-Session-Key": "global", "X-Agent-Id": "secg"}
    for name, args in (
        ("sessions_spawn", {"label": "x"}),
        ("sessions_send", {"sessionKey": "global", "message": "m"}),
        ("session_unwatch", {"sessionKey": "agent:secg:main"}),
    ):
        res = http.post(f"/v1/tools/{name}", json=args, headers=bare)
        assert res.status_code == 403 and res.json()["error"]["code"] == "forbidden", res.text
    # Reading tools are fine for a bare global caller that names its agent.
    res = http.post("/v1/tools/session_status", json={}, headers=bare)
    assert res.status_code == 200 and res.json()["sessionKey"] == "global"
    res = http.post("/v1/tools/session_status", json={}, headers={"X-Session-Key": "global"})
    assert res.status_code == 400 and "agent" in res.json()["error"]["message"]
    res = http.post("/v1/tools/session_status", json={})
    assert res.status_code == 400 and "X-Session-Key" in res.json()["error"]["message"]
