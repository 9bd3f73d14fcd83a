"""Bad input on the command line gets a clear error and changes nothing (issue 8, item 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import listening_socket, port_of, spawn_serving

from .conftest import SESSIONWATCH, Result, Runner, clean_env


def run_in(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    return Result(
        subprocess.run(
            [*SESSIONWATCH, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env if env is not None else clean_env(XDG_STATE_HOME=str(cwd / "state")),
        )
    )


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# -- store URLs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url", ["mysql://root@localhost/sw", "file:///tmp/x.db", "sqlite://tmp/x.db", "sqlite:x.db", "sqlite://"]
)
def test_a_store_url_that_can_only_be_a_mistake_is_a_usage_error(tmp_path: Path, url: str) -> None:
    r = run_in(tmp_path, "--store", url, "sessions")
    assert r.code == 2, r
    assert "invalid_argument" in r.err and "No sessions" not in r.out
    assert tree(tmp_path) == []  # no 'mysql:' file, no 'tmp' folder
    j = run_in(tmp_path, "--store", url, "--json", "sessions")
    assert j.code == 2 and j.json()["error"]["code"] == "invalid_argument"


def test_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    r = run_in(tmp_path, "--store", f"sqlite:///{tmp_path}/typo/dir/x.db", "sessions")
    assert r.code == 2 and "does not exist" in r.err and str(tmp_path / "typo" / "dir") in r.err, r
    assert run_in(tmp_path, "--store", "typo/x.db", "sessions").code == 2  # a plain relative path too
    assert tree(tmp_path) == []


def test_a_new_store_file_is_announced_once_with_its_path(tmp_path: Path) -> None:
    first = run_in(tmp_path, "--store", "sqlite:///new.db", "sessions")
    assert first.code == 0, first
    assert first.err.count("created a new store") == 1 and str(tmp_path / "new.db") in first.err
    again = run_in(tmp_path, "--store", "sqlite:///new.db", "sessions")
    assert again.code == 0 and "created" not in again.err


def test_the_default_store_folder_is_created_on_first_use(tmp_path: Path) -> None:
    r = run_in(tmp_path, "sessions")
    default = tmp_path / "state" / "sessionwatch" / "sessionwatch.db"
    assert r.code == 0 and default.is_file() and str(default) in r.err, r


# -- sessions and flags ----------------------------------------------------------------------------
def test_drain_of_an_unknown_session_is_not_found(sw: Runner) -> None:
    r = sw("drain", "agent:main:typo")
    assert r.code == 3 and "not_found" in r.err and "No pending" not in r.out, r
    j = sw("drain", "agent:main:typo", "--json")
    assert j.code == 3 and j.json()["error"]["code"] == "not_found"
    assert sw("put", "agent:main:real").code == 0
    ok = sw("drain", "agent:main:real")
    assert ok.code == 0 and "No pending system events" in ok.out


@pytest.mark.parametrize("url", ["127.0.0.1:7878", "localhost", "ftp://h", "http://"])
def test_gateway_without_http_scheme_is_a_usage_error(sw: Runner, url: str) -> None:
    r = sw("--gateway", url, "sessions")
    assert r.code == 2 and "http://" in r.err, r
    j = sw("--gateway", url, "sessions", "--json")
    assert j.code == 2 and j.json()["error"]["code"] == "invalid_argument"
    env = clean_env(SESSIONWATCH_GATEWAY=url)
    assert sw("sessions", env=env).code == 2


def test_token_without_gateway_warns(sw: Runner, store: str) -> None:
    r = sw("--token", "abc", "sessions")
    assert r.code == 0 and "warning" in r.err and "--gateway" in r.err, r
    quiet = sw("sessions", env=clean_env(SESSIONWATCH_STORE=store, SESSIONWATCH_TOKEN="abc"))
    assert quiet.code == 0 and "warning" not in quiet.err  # from the environment it may be meant for serve


@pytest.mark.parametrize(
    "args",
    [
        ["--json", "status"],
        ["status", "--json"],
        ["--json", "frobnicate"],
        ["--json", "--no-such-flag", "sessions"],
        ["sessions", "--limit", "x", "--json"],
        ["status", "agent:a:b", "--bogus", "--json"],
    ],
)
def test_usage_errors_print_json_under_json(sw: Runner, args: list[str]) -> None:
    r = sw(*args)
    assert r.code == 2, r
    err = r.json()["error"]
    assert err["code"] == "invalid_argument" and err["message"]
    assert "Usage:" not in r.err


def test_usage_errors_without_json_stay_readable(sw: Runner) -> None:
    r = sw("status")
    assert r.code == 2 and "Usage:" in r.err and r.out == ""


# -- serve -------------------------------------------------------------------------------------------
@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port this test listens on, for the whole test: the server's bind must fail."""
    with listening_socket() as s:
        yield port_of(s)


SERVERS = {"cli": [*SESSIONWATCH, "serve"], "module": [sys.executable, "-m", "sessionwatch.http"]}


@pytest.mark.parametrize("entry", sorted(SERVERS))
def test_serve_on_a_busy_port_exits_1_with_one_line(tmp_path: Path, busy_port: int, entry: str) -> None:
    p = subprocess.run(
        [*SERVERS[entry], "--port", str(busy_port), "--store", f"sqlite:///{tmp_path}/s.db"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert p.returncode == 1, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "unavailable" in lines[0] and str(busy_port) in lines[0], p.stderr
    assert "not found" not in p.stderr and not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("entry", sorted(SERVERS))
def test_serve_with_a_store_the_database_refuses_fails_before_listening(entry: str) -> None:
    from tests.support import pg

    if not pg.available():
        pytest.skip("PostgreSQL is not reachable")
    p = subprocess.run(
        [*SERVERS[entry], "--port", "0", "--store", "postgresql://postgres:secret@127.0.0.1:5432/sw_no_such_database"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert p.returncode == 1, p  # the server answered "no such database": a wait cannot cure that
    assert "Uvicorn running" not in p.stderr and "listening" not in p.stderr and "startup" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].count("cannot open store") == 1, p.stderr  # said once, not wrapped twice
    assert "does not exist" in lines[0] and "secret" not in p.stderr


@pytest.mark.parametrize("entry", sorted(SERVERS))
def test_serve_with_an_unreachable_database_serves_and_waits_for_it(entry: str) -> None:
    """Nothing answers at the database's address: the gateway serves anyway (liveness 200, readiness 503
    saying what it waits for) instead of exiting, and stops cleanly when told to."""
    import signal

    import httpx

    from tests.support.waiting import wait_until

    sock = listening_socket()
    url = f"http://127.0.0.1:{port_of(sock)}"
    proc = spawn_serving(
        [*SERVERS[entry], "--store", "postgresql://sw:secret@127.0.0.1:1/sw", "--log-level", "info"],
        sock,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clean_env(),
    )
    try:
        live = wait_until(lambda: httpx.get(url + "/v1/health/live", timeout=5), timeout=30, what="liveness")
        assert live.status_code == 200
        ready = wait_until(
            lambda: (
                (r := httpx.get(url + "/v1/health/ready", timeout=5)).status_code == 503
                and "waiting for the database" in r.json().get("message", "")
                and r
            ),
            timeout=30,
            what="readiness saying what it waits for",
        )
        assert "secret" not in ready.text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGTERM), out  # uvicorn ends by the signal it was stopped with
    assert "secret" not in out and "serving anyway" in out and "ERROR" not in out


@pytest.mark.parametrize("entry", sorted(SERVERS))
@pytest.mark.parametrize("store,code", [("mysql://x/y", 2), ("sqlite:///{tmp}/missing/x.db", 2)])
def test_serve_exits_alike_for_bad_store_urls(tmp_path: Path, entry: str, store: str, code: int) -> None:
    p = subprocess.run(
        [*SERVERS[entry], "--port", "0", "--store", store.format(tmp=tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert p.returncode == code and p.stderr.startswith("error (invalid_argument):"), p
    assert tree(tmp_path) == []


@pytest.mark.parametrize("entry", sorted(SERVERS))
def test_serve_beyond_loopback_without_token_exits_4_from_both(entry: str) -> None:
    p = subprocess.run(
        [*SERVERS[entry], "--host", "0.0.0.0", "--port", "0", "--store", "sqlite:///unused.db"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert p.returncode == 4 and p.stderr.startswith("error (forbidden):"), p


def test_serve_ready_line_names_the_store(tmp_path: Path) -> None:
    proc = spawn_serving(
        [*SESSIONWATCH, "serve", "--no-monitor", "--store", f"sqlite:///{tmp_path}/ready.db"],
        listening_socket(),
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        for line in proc.stderr:
            seen.append(line)
            if "gateway ready" in line:
                break
        assert "gateway ready" in seen[-1] and str(tmp_path / "ready.db") in seen[-1], seen
        assert sum("created a new store" in line for line in seen) == 1
        assert next(i for i, x in enumerate(seen) if "listening on" in x) < len(seen) - 1
        assert any("dashboard: http://127.0.0.1:" in x and x.rstrip().endswith("/ui/") for x in seen), seen
    finally:
        proc.terminate()
        proc.wait(15)
        if proc.stderr:
            proc.stderr.close()


def test_python_m_sessionwatch_http_and_serve_print_the_same_error(tmp_path: Path) -> None:
    outs = [
        subprocess.run(
            [*cmd, "--port", "0", "--store", "mysql://x"], capture_output=True, text=True, timeout=60, env=clean_env()
        )
        for cmd in SERVERS.values()
    ]
    assert outs[0].returncode == outs[1].returncode == 2
    assert outs[0].stderr.strip() == outs[1].stderr.strip(), outs
    json.dumps([o.stderr for o in outs])


def test_since_beyond_64_bits_is_a_usage_error(sw: Runner) -> None:
    assert sw("put", "agent:main:main").code == 0
    r = sw("status", "agent:main:main", "--since", str(2**63), "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "invalid_argument", r
    assert sw("status", "agent:main:main", "--since", str(2**63 - 1)).code == 0
    assert sw("log", "--since", str(2**63)).code == 2


@pytest.mark.parametrize("ch", ["\u202e", "\u2067", "\u200b", "\u0080"])
def test_a_key_that_can_hide_or_reorder_words_is_refused_by_the_cli_and_creates_nothing(
    sw: Runner, store: str, ch: str
) -> None:
    assert sw("put", "agent:a:main").code == 0
    bad = f"agent:a:evil{ch}txt"
    for args in (["put", bad], ["inbound", bad, "hi"], ["watch", "agent:a:main", bad], ["put", f"agent:a{ch}:main"]):
        res = sw(*args, "--json")
        assert res.code == 2, res  # a usage error, as every invalid_argument
        assert res.json()["error"]["code"] == "invalid_argument", res
        assert ch not in res.out
    listed = sw("sessions", "--json").json()
    assert [s["sessionKey"] for s in listed["sessions"]] == ["agent:a:main"]


def test_a_key_stored_with_such_characters_is_listed_escaped(sw: Runner, store: str) -> None:
    import uuid

    from sessionwatch.store import open_store
    from sessionwatch.store.records import SessionRow

    assert sw("put", "agent:a:main").code == 0
    legacy = "agent:a:report\u202egnp.exe"
    s = open_store(store)  # written as a store from before the rule would have
    try:
        s.put_session(SessionRow(legacy, "a", uuid.uuid4().hex, "other", 1, 1))
    finally:
        s.close()
    res = sw("sessions")
    assert res.code == 0, res
    assert "agent:a:report\\u202egnp.exe" in res.out and "\u202e" not in res.out
    as_json = sw("sessions", "--json")
    assert legacy in [s["sessionKey"] for s in as_json.json()["sessions"]]  # the data itself is exact
