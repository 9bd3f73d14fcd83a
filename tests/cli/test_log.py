"""``sessionwatch log``: the whole signal log, oldest first, and --follow tailing it live."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from sessionwatch import Gateway

from .conftest import SESSIONWATCH, Runner, clean_env

MAIN = "agent:main:main"
KID = "agent:main:subagent:kid"


def _seed(store: str, texts: list[str]) -> None:
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MAIN)
        gw.put_session(KID, spawned_by=MAIN, created_by={"type": "agent", "id": MAIN})
        for t in texts:
            gw.inbound(KID, t, channel="webchat", human_id="dana")


def test_log_prints_every_event_in_order(sw: Runner, store: str) -> None:
    _seed(store, ["one", "two"])
    r = sw("log")
    assert r.code == 0, r
    lines = r.out.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("#1 ") and "created" in lines[0]
    assert (
        lines[1].startswith("#2 ")
        and KID in lines[1]
        and "human_direct_message" in lines[1]
        and "human:dana" in lines[1]
    )
    events = [json.loads(ln) for ln in sw("log", "--json").out.splitlines()]
    assert [e["sequence"] for e in events] == [1, 2, 3]
    assert [e["sequence"] for e in map(json.loads, sw("log", "--since", "2", "--json").out.splitlines())] == [3]
    assert "one" not in r.out  # the log holds summaries, never message content


def test_log_follow_tails_new_events(store: str) -> None:
    _seed(store, ["before"])
    proc = subprocess.Popen(
        [*SESSIONWATCH, "log", "--follow", "--json", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(SESSIONWATCH_STORE=store),
    )
    try:
        assert proc.stdout is not None
        seen = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [e["sequence"] for e in seen] == [1, 2]
        _seed(store, ["after"])
        tailed = json.loads(proc.stdout.readline())
        assert tailed["sequence"] == 3 and tailed["kind"] == "human_direct_message"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_log_on_an_empty_store_prints_nothing(sw: Runner) -> None:
    r = sw("log")
    assert r.code == 0 and r.out == ""
    t0 = time.monotonic()
    assert sw("log", "--json").out == ""
    assert time.monotonic() - t0 < 10
