"""``drain`` prints, then acknowledges: a drain whose output never reached anyone consumes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sessionwatch import Gateway
from sessionwatch.notices import notice_text

MAIN = "agent:main:main"
SW = str(Path(sys.executable).parent / "sessionwatch")


def test_a_drain_that_cannot_print_leaves_the_notice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    with Gateway.open(url, timers=False) as gw:
        gw.put_session(MAIN)
        kid = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MAIN)
        gw.inbound(kid["sessionKey"], "hello", channel="webchat")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # stdout is a pipe whose reader is gone: printing fails, so nothing may be acknowledged.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        broken = subprocess.run(
            [SW, "--store", url, "drain", MAIN], stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60
        )
    finally:
        os.close(write_end)
    assert broken.returncode != 0
    with Gateway.open(url, timers=False) as gw:
        assert [e["text"] for e in gw.peek_system_events(MAIN)] == [notice_text(kid["sessionKey"], kid["stateVersion"])]
    shown = subprocess.run([SW, "--store", url, "drain", MAIN], capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0 and notice_text(kid["sessionKey"], kid["stateVersion"]) in shown.stdout
    with Gateway.open(url, timers=False) as gw:
        assert gw.peek_system_events(MAIN) == []
