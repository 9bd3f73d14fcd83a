"""Startup readiness, failure to open, borrowed gateways, the access log and the module entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from sessionwatch import Gateway
from sessionwatch.http.app import create_app
from tests.support.ports import ServerThread, listening_socket, spawn_serving
from tests.support.waiting import wait_until


@contextmanager
def served(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Serve an app with uvicorn on a thread (a real HTTP server on a 127.0.0.1 socket opened here)."""
    with ServerThread(app, lifespan="on") as server:
        yield server.url


def _run_module(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m sessionwatch.http ARGS`` on a socket opened here, to its exit."""
    proc = spawn_serving(
        [sys.executable, "-m", "sessionwatch.http", *args],
        listening_socket(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_health_is_503_until_the_restart_sweep_has_finished(tmp_path: Path) -> None:
    release = threading.Event()
    opened: list[Gateway] = []

    def slow_open() -> Gateway:
        release.wait(10)  # stands in for a long restart sweep
        gw = Gateway.open(f"sqlite:///{tmp_path}/s.db")
        opened.append(gw)
        return gw

    with served(create_app(slow_open)) as url:
        res = httpx.get(f"{url}/v1/health")
        assert res.status_code == 503 and res.json()["status"] == "starting"
        res = httpx.post(f"{url}/v1/tools/sessions_list", json={}, headers={"X-Session-Key": "agent:a:main"})
        assert res.status_code == 503 and res.json()["error"]["code"] == "unavailable"
        assert "starting" in res.json()["error"]["message"]
        release.set()
        wait_until(lambda: httpx.get(f"{url}/v1/health").status_code == 200, what="health 200 after the sweep")
        health = httpx.get(f"{url}/v1/health").json()
        assert health["status"] == "ok" and health["storeUrl"].endswith("s.db") and health["swept"] == 0
    assert opened[0]._closed, "the app opened the gateway, so it must close it on shutdown"


def test_open_failure_is_reported_not_crashed(tmp_path: Path) -> None:
    def broken() -> Gateway:
        raise OSError("disk on fire")

    with served(create_app(broken)) as url:
        wait_until(
            lambda: httpx.get(f"{url}/v1/health").json()["status"] != "starting",
            timeout=5,
            what="health past 'starting'",
        )
        res = httpx.get(f"{url}/v1/health")
        assert res.status_code == 503 and res.json()["status"] == "failed"
        assert "disk on fire" in res.json()["message"]
        res = httpx.get(f"{url}/v1/sessions/agent:a:main")
        assert res.status_code == 503 and "disk on fire" in res.json()["error"]["message"]


def test_a_borrowed_gateway_stays_open(tmp_path: Path) -> None:
    gw = Gateway.open(f"sqlite:///{tmp_path}/s.db")
    try:
        with served(create_app(gw)) as url:
            assert httpx.get(f"{url}/v1/health").json()["status"] == "ok"
            assert httpx.put(f"{url}/v1/sessions/agent:a:main", json={}).status_code == 200
        assert not gw._closed
        assert gw.get_session("agent:a:main")["sessionKey"] == "agent:a:main"
    finally:
        gw.close()


def test_access_log_is_one_json_line_per_request_and_can_be_silenced(gateway_factory, tmp_path: Path) -> None:
    loud = gateway_factory(env={"SESSIONWATCH_ACCESS_LOG": "1"}, extra_args=["--log-level", "info"]).start()
    httpx.put(f"{loud.url}/v1/sessions/agent:log:main", json={})
    httpx.get(f"{loud.url}/v1/sessions/agent:log:nobody")
    loud.stop()
    lines = [json.loads(line) for line in loud.log_path.read_text().splitlines() if line.startswith("{")]
    assert {"method": "PUT", "path": "/v1/sessions/agent:log:main", "status": 200} in [
        {k: v for k, v in line.items() if k not in ("ms", "requestId")} for line in lines
    ]
    assert any(line["status"] == 404 and line["method"] == "GET" for line in lines)
    assert all(isinstance(line["ms"], float) and line["requestId"] for line in lines)

    quiet = gateway_factory(
        env={"SESSIONWATCH_ACCESS_LOG": "1"}, extra_args=["--log-level", "info", "--no-access-log"]
    ).start()
    httpx.put(f"{quiet.url}/v1/sessions/agent:log:main", json={})
    quiet.stop()
    assert not [line for line in quiet.log_path.read_text().splitlines() if line.startswith("{")]


def test_module_entry_point_reports_an_unopenable_store(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = _run_module("--store", f"sqlite:///{blocker}/state.db", "--no-monitor", "--log-level", "critical")
    assert proc.returncode == 2  # a folder that is a file: a usage error, like `sessionwatch serve`
    assert "invalid_argument" in proc.stderr and "not a folder" in proc.stderr
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database" * 200)
    proc = _run_module("--store", f"sqlite:///{corrupt}", "--no-monitor", "--log-level", "critical")
    assert proc.returncode == 1  # the store cannot be opened: unavailable, said once
    assert proc.stderr.startswith("error (unavailable):") and proc.stderr.count("cannot open store") == 1
