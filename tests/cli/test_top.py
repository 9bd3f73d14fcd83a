"""``sessionwatch top``: one frame (--once) of stale pairs and the log tail, local and through a gateway."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.http.conftest import GatewayProcess
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

from .conftest import Runner, clean_env

MAIN, KID = "agent:top:main", "agent:top:subagent:kid"


def _stale_setup(sw: Runner) -> None:
    assert sw("put", MAIN).code == 0
    assert sw("put", KID, "--spawned-by", MAIN).code == 0
    assert sw("watch", KID, "--as", MAIN).code == 0
    assert sw("inbound", KID, "are you there?", "--channel", "webchat").code == 0


def test_once_json_shows_the_stale_pair_its_notice_and_the_log(sw: Runner, store: str) -> None:
    _stale_setup(sw)
    frame = sw("top", "--once", "--json")
    assert frame.code == 0, frame
    out = frame.json()
    assert [(s["watcher"], s["target"]) for s in out["stale"]] == [(MAIN, KID)]
    pair = out["stale"][0]
    assert pair["material"] > pair["lastSeen"] and pair["behind"] == pair["material"] - pair["lastSeen"]
    assert pair["notice"].startswith(f'Session "{KID}" changed')
    assert out["log"][-1]["kind"] == "human_direct_message" and out["lastSequence"] == out["log"][-1]["sequence"]
    # top only looks: the notice is still queued afterwards
    assert len(sw("drain", MAIN, "--json").json()["events"]) == 1
    assert sw("top", "--once", "--json").json()["stale"] == []


def test_once_plain_render(sw: Runner, store: str) -> None:
    _stale_setup(sw)
    frame = sw("top", "--once", env=clean_env(SESSIONWATCH_STORE=store, COLUMNS="250"))
    assert frame.code == 0, frame
    assert "Stale pairs" in frame.out and "Log tail" in frame.out
    assert MAIN in frame.out and KID in frame.out and "human_direct_message" in frame.out
    assert "Reconcile before acting" in frame.out


@pytest.mark.slow
def test_top_against_a_gateway(tmp_path) -> None:
    # The access log shows each refresh of the live view (one GET /v1/cursors per frame).
    gp = GatewayProcess(
        f"sqlite:///{tmp_path}/gw.db",
        tmp_path / "gw.log",
        env={"SESSIONWATCH_ACCESS_LOG": "1"},
        extra_args=["--log-level", "info"],
    ).start()

    def frames() -> int:
        lines = [ln for ln in gp.log_path.read_text().splitlines() if ln.startswith("{")]
        return sum(1 for ln in lines if json.loads(ln).get("path") == "/v1/cursors")

    try:
        env = clean_env()

        def remote(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*SESSIONWATCH, "--gateway", gp.url, *args], capture_output=True, text=True, timeout=60, env=env
            )

        assert remote("put", MAIN).returncode == 0
        assert remote("put", KID, "--spawned-by", MAIN).returncode == 0
        assert remote("watch", KID, "--as", MAIN).returncode == 0
        assert remote("inbound", KID, "hello", "--channel", "webchat").returncode == 0

        out = json.loads(remote("top", "--once", "--json").stdout)
        assert [(s["watcher"], s["target"]) for s in out["stale"]] == [(MAIN, KID)]
        assert out["stale"][0]["notice"] and out["log"][-1]["kind"] == "human_direct_message"

        # The live view refreshes: a new event shows up in the running process's output.
        live = subprocess.Popen(
            [*SESSIONWATCH, "--gateway", gp.url, "top", "--interval", "0.2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "COLUMNS": "200"},
        )
        try:
            before = frames()
            wait_until(lambda: frames() > before, timeout=20, what="a refresh of the live view")
            assert remote("inbound", KID, "second message", "--channel", "webchat").returncode == 0
            # The frame after next began after the message, and the one after that proves it was drawn.
            after = frames()
            wait_until(lambda: frames() >= after + 3, timeout=20, what="three refreshes after the message")
        finally:
            live.send_signal(signal.SIGINT)  # Ctrl-C: the view stops and leaves its last frame
            stdout, _ = live.communicate(timeout=10)
        assert live.returncode == 0
        assert "Stale pairs" in stdout and stdout.count("human_direct_message") >= 2, stdout
    finally:
        gp.stop()
    assert os.path.exists(tmp_path / "gw.db")
