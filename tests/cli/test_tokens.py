"""``sessionwatch token``: a random token, and tokens kept hashed in the store (create, list, revoke); a
scoped token tails only its agents' log through a real gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessionwatch.client import GatewayClient
from tests.support.commands import SESSIONWATCH
from tests.support.ports import listening_socket, spawn_serving, url_of
from tests.support.procs import stop
from tests.support.waiting import wait_http

from .conftest import Runner, clean_env

ADMIN = "cli-admin-token-0123456789"


def test_token_alone_and_generate_print_a_random_token_and_store_nothing(sw: Runner, store: str) -> None:
    first, second = sw("token").out.strip(), sw("token", "generate").out.strip()
    assert len(first) >= 40 and len(second) >= 40 and first != second
    assert len(sw("token", "generate", "--json").json()["token"]) >= 40
    assert sw("token", "list", "--json").json() == {"tokens": []}


@pytest.mark.slow
def test_create_list_revoke(sw: Runner, store: str) -> None:
    made = sw("token", "create", "--agent", "ops", "--agent", "dev", "--name", "release bot", "--json")
    assert made.code == 0, made
    data = made.json()
    assert data["token"].startswith(f"sw_{data['id']}_") and data["agents"] == ["ops", "dev"]
    human = sw("token", "create", "--admin")
    assert human.code == 0 and human.out.startswith("sw_") and "shown once" in human.out
    listed = sw("token", "list", "--json").json()["tokens"]
    assert [(t["id"], t["agents"], t["admin"], t["revoked"]) for t in listed][0] == (
        data["id"],
        ["ops", "dev"],
        False,
        False,
    )
    table = sw("token", "list")
    assert "release bot" in table.out and "ops, dev" in table.out and "admin" in table.out
    assert "sw_" not in table.out and data["token"] not in json.dumps(listed)
    assert sw("token", "revoke", data["id"]).out.strip() == f"token {data['id']} revoked"
    assert sw("token", "revoke", data["id"], "--json").json() == {"id": data["id"], "revoked": False}
    assert sw("token", "list", "--json").json()["tokens"][0]["revoked"] is True
    assert sw("token", "revoke", "000000000000").code == 3
    for bad in (["create"], ["create", "--admin", "--agent", "ops"], ["create", "--agent", "a:b"]):
        assert sw("token", *bad).code == 2, bad
    assert len(sw("token", "list", "--json").json()["tokens"]) == 2  # bad requests changed nothing
    assert sw("--gateway", "http://127.0.0.1:9", "token", "list").code == 2  # tokens live in the store


@pytest.mark.slow
def test_a_scoped_token_tails_only_its_agents_log(sw: Runner, store: str, tmp_path: Path) -> None:
    token = sw("token", "create", "--agent", "ops", "--json").json()["token"]
    sock = listening_socket()  # served with --fd: no port race
    url = url_of(sock)
    gateway = spawn_serving(
        [
            sys.executable,
            "-m",
            "sessionwatch.http",
            "--store",
            store,
            "--token",
            ADMIN,
            "--no-monitor",
            "--no-access-log",
        ],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "gw.log", "wb"),
        env=clean_env(),
    )
    tail = None
    try:
        wait_http(url + "/v1/health", gateway, log=tmp_path / "gw.log")
        with GatewayClient(url, token=ADMIN) as admin:
            for key in ("agent:ops:main", "agent:dev:main"):
                admin.put_session(key)
                admin.record_compaction(key, f"before-{key}")
            tail = subprocess.Popen(
                [*SESSIONWATCH, "--gateway", url, "--token", token, "log", "--follow", "--json", "--interval", "0.05"],
                stdout=subprocess.PIPE,
                text=True,
                env=clean_env(),
            )
            assert tail.stdout is not None
            first = json.loads(tail.stdout.readline())
            for key in ("agent:dev:main", "agent:ops:main"):
                admin.record_compaction(key, f"after-{key}")
            second = json.loads(tail.stdout.readline())
        assert first["sessionKey"] == "agent:ops:main" and first["kind"] == "compacted"
        assert second["sessionKey"] == "agent:ops:main" and second["sequence"] > first["sequence"]
        # with the admin token the same command shows both agents
        every = sw("--gateway", url, "--token", ADMIN, "log", "--json", env=clean_env())
        assert {json.loads(line)["agentId"] for line in every.out.splitlines()} == {"ops", "dev"}
        # and the scoped token may list its own agent's sessions (not the operator's)
        mine = sw("--gateway", url, "--token", token, "sessions", "--agent", "ops", "--json", env=clean_env())
        assert mine.code == 0, mine
        assert sw("--gateway", url, "--token", token, "sessions", "--agent", "dev", env=clean_env()).code == 4
    finally:
        if tail is not None:
            stop(tail)
        stop(gateway)
