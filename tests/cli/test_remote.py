"""The same commands against a real gateway process (``--gateway URL --token T``), and the demo."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import listening_socket, refusing_port, spawn_serving, url_of
from tests.support.procs import stop
from tests.support.waiting import wait_http

from .conftest import SESSIONWATCH, Result, clean_env

pytest.importorskip("sessionwatch.client")
pytestmark = pytest.mark.slow

MAIN = "agent:main:main"
KID = "agent:main:subagent:kid"
TOKEN = "cli-remote-test-token"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("gw")
    sock = listening_socket()  # served with --fd: no port race
    url = url_of(sock)
    proc = spawn_serving(
        [
            sys.executable,
            "-m",
            "sessionwatch.http",
            "--store",
            f"sqlite:///{tmp}/gw.db",
            "--token",
            TOKEN,
            "--no-monitor",
            "--no-access-log",
        ],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=open(Path(tmp) / "gw.log", "wb"),
        env=clean_env(),
    )
    try:
        wait_http(f"{url}/v1/health", proc, timeout=30, log=Path(tmp) / "gw.log")
        yield url
    finally:
        stop(proc, 15)


def remote(url: str, *args: str, token: str = TOKEN, timeout: float = 60) -> Result:
    proc = subprocess.run(
        [*SESSIONWATCH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(SESSIONWATCH_GATEWAY=url, SESSIONWATCH_TOKEN=token),
    )
    return Result(proc)


def test_the_operator_loop_through_a_gateway(gateway: str) -> None:
    main, kid = MAIN.replace("main:main", "r1:main"), KID.replace("main:", "r1:", 1)
    assert remote(gateway, "put", main).code == 0
    assert remote(gateway, "put", kid, "--spawned-by", main).code == 0
    assert remote(gateway, "watch", kid, "--as", main, "--json").json()["watching"] is True
    rec = remote(gateway, "inbound", kid, "over to you", "--channel", "webchat", "--json")
    assert rec.code == 0 and rec.json()["recorded"] is True, rec
    rows = {r["sessionKey"]: r for r in remote(gateway, "sessions", "--json").json()["sessions"]}
    assert rows[main]["pending"] == 1 and rows[kid]["stateVersion"] >= 1
    status = remote(gateway, "status", kid, "--since", "0", "--json").json()
    assert "human_direct_message" in [e["kind"] for e in status["stateChanges"]["events"]]
    drained = remote(gateway, "drain", main)
    assert drained.code == 0 and drained.out.startswith("System: [")
    assert remote(gateway, "drain", main, "--json").json()["events"] == []
    log = [json.loads(ln) for ln in remote(gateway, "log", "--json").out.splitlines()]
    assert any(e["sessionKey"] == kid and e["kind"] == "human_direct_message" for e in log)
    assert remote(gateway, "send", kid, "thanks", "--as", main, "--json").json()["status"] == "accepted"
    assert remote(gateway, "cursors", "--watcher", main, "--json").json()["cursors"][0]["target"] == kid
    assert remote(gateway, "prune", "--json").code == 0


def test_remote_errors_keep_their_exit_codes(gateway: str) -> None:
    assert remote(gateway, "status", "agent:main:nobody").code == 3
    assert remote(gateway, "status", "agent::bad").code == 2
    denied = remote(gateway, "sessions", token="wrong-token")
    assert denied.code == 4 and "unauthorized" in denied.err, denied
    with refusing_port() as port:  # nothing listens there
        down = remote(f"http://127.0.0.1:{port}", "sessions")
    assert down.code == 75, down  # EX_TEMPFAIL: the gateway did not answer, try again


def test_demo_starts_its_own_gateway_and_succeeds() -> None:
    r = subprocess.run([*SESSIONWATCH, "demo"], capture_output=True, text=True, timeout=90, env=clean_env())
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "exactly one notice waiting" in r.stdout and "still gives exactly one notice (coalesced)" in r.stdout
    assert "changed (other actor). Reconcile before acting" in r.stdout
    assert "Done:" in r.stdout


def test_demo_against_a_given_gateway_as_json(gateway: str) -> None:
    r = remote(gateway, "demo", "--json", timeout=90)
    assert r.code == 0, r
    body = r.json()
    assert body["ok"] is True
    titles = [s["title"] for s in body["steps"]]
    assert len(titles) == 9 and body["steps"][0]["started"] is False
    reconcile = next(s for s in body["steps"] if "events" in s)
    assert [e["kind"] for e in reconcile["events"]] == ["human_direct_message"]
    # someone's gateway is left as it was: the demo's two sessions are gone again
    made = {body["steps"][1]["manager"], body["steps"][2]["child"]}
    assert set(body["deleted"]) == made
    listed = remote(gateway, "sessions", "--json").json()
    keys = {s["sessionKey"] for s in listed["sessions"]}
    assert not keys & made, keys


def test_demo_keep_leaves_its_sessions(gateway: str) -> None:
    r = remote(gateway, "demo", "--json", "--keep", timeout=90)
    assert r.code == 0, r
    body = r.json()
    assert body["deleted"] == []
    listed = {s["sessionKey"] for s in remote(gateway, "sessions", "--json").json()["sessions"]}
    assert body["steps"][1]["manager"] in listed


def test_mcp_through_a_gateway(gateway: str) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    from sessionwatch.client import GatewayClient

    from ..mcp.helpers import assert_published_tools, run_notice_scenario

    async def scenario() -> None:
        params = StdioServerParameters(
            command=SESSIONWATCH[0],
            args=[*SESSIONWATCH[1:], "mcp", "--session", MAIN],
            env=clean_env(SESSIONWATCH_GATEWAY=gateway, SESSIONWATCH_TOKEN=TOKEN),
        )
        client = GatewayClient(gateway, token=TOKEN)
        try:
            async with Client(params) as mcp_client:
                await assert_published_tools(mcp_client)
                await run_notice_scenario(
                    mcp_client, lambda child: client.inbound(child, "hi", channel="webchat"), child_label="remote-kid"
                )
        finally:
            client.close()

    anyio.run(scenario)
