"""A host session's lifecycle reaches the store in the order its host fired the hooks.

A hook run that only writes answers its host at once and leaves the write to a detached child; the host's
next event may come milliseconds later (a turn's ``Stop``, then ``SessionEnd``; a prompt, then a
permission request). Each run that writes takes a ticket before it forks, and writes once the runs before
it have (hooks/order.py): without it, a later run that loaded the engine first wrote first, and the store
dropped the earlier report as late (the Pi test saw ``ended`` with no ``idle`` before it, on a busy machine).

Real hook processes, with the payloads Claude Code sends, each session's events fired back to back.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from sessionwatch import Gateway
from sessionwatch.hooks import order
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

SESSIONS = 6
STATES = ("session_working", "session_waiting", "session_idle", "session_ended")


def _thread(i: int) -> str:
    return f"0b5a4f8e-6d1c-4bda-9a40-2c1f0d3e8b{i:02d}"


def _key(i: int) -> str:
    return f"agent:project:claude:{_thread(i)}"


class Host:
    """Claude Code's hooks for host sessions whose transcripts exist (so each is adopted by its first event,
    and later events take the hook's quick path as for any adopted session)."""

    def __init__(self, tmp: Path) -> None:
        from tests.upstream.writers import ClaudeTranscript

        self.store = f"sqlite:///{tmp / 'sw.db'}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "CLAUDE_", "CODEX_"))}
        self.env["XDG_STATE_HOME"] = str(tmp / "state")
        self.env["CLAUDE_CONFIG_DIR"] = str(tmp / "claude")
        Gateway.open(self.store, timers=False).close()
        self.transcripts = {}
        for i in range(SESSIONS):
            claude = ClaudeTranscript(tmp / "claude", cwd="/home/dev/project", session_id=_thread(i))
            claude.assistant("ready")
            self.transcripts[i] = str(claude.path)

    def fire(self, i: int, event: str, **extra: Any) -> None:
        payload = {
            "session_id": _thread(i),
            "transcript_path": self.transcripts[i],
            "cwd": "/home/dev/project",
            "hook_event_name": event,
            "permission_mode": "default",
            **extra,
        }
        cmd = [*SESSIONWATCH, "--store", self.store, "hook", "claude-code", "--agent", "project", "--no-nudge"]
        out = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, env=self.env, timeout=120)
        assert out.returncode == 0, out.stderr

    def states(self, i: int) -> list[str]:
        with Gateway.open(self.store, timers=False) as gw:
            return [e["kind"] for e in gw.changes_since(_key(i), 0).to_json()["events"] if e["kind"] in STATES]

    def state(self, i: int) -> str | None:
        with Gateway.open(self.store, timers=False) as gw:
            return (gw.lifecycle_of(_key(i), "project") or {}).get("state")


def test_each_sessions_states_are_written_in_the_order_its_host_fired_them(tmp_path: Path) -> None:
    host = Host(tmp_path)

    def session(i: int) -> None:  # one host: each event as soon as the last hook returned
        host.fire(i, "SessionStart", source="startup")
        host.fire(i, "UserPromptSubmit", prompt="go")
        host.fire(i, "PermissionRequest", tool_name="Bash", tool_input={"command": "ls"})
        host.fire(i, "PostToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_response={"stdout": ""})
        host.fire(i, "Stop", stop_hook_active=False)
        host.fire(i, "SessionEnd", reason="prompt_input_exit")

    hosts = [threading.Thread(target=session, args=(i,)) for i in range(SESSIONS)]  # several at once: a busy
    for t in hosts:  # machine, where a detached child can be overtaken
        t.start()
    for t in hosts:
        t.join(300)
        assert not t.is_alive()
    wait_until(
        lambda: all(host.state(i) == "ended" for i in range(SESSIONS)),
        timeout=60,
        what="every session ended (the detached writes done)",
    )
    for i in range(SESSIONS):
        states = host.states(i)
        assert states[-5:] == [
            "session_working",
            "session_waiting",
            "session_working",
            "session_idle",
            "session_ended",
        ], (
            i,
            states,
        )


def test_a_write_waits_for_the_run_its_host_fired_before_it(tmp_path: Path) -> None:
    """An earlier run of the session has not written yet (its ticket is out, unserved): the end of the
    session, fired next, is written only after it; and a run that never says it is done holds nothing up
    for longer than the hook's budget."""
    host = Host(tmp_path)
    host.fire(0, "SessionStart", source="startup")
    host.fire(0, "UserPromptSubmit", prompt="go")
    wait_until(lambda: host.state(0) == "working", timeout=60, what="the turn working")
    earlier = _ticket_in(tmp_path / "state" / "sessionwatch", _thread(0))
    ending = threading.Thread(target=host.fire, args=(0, "SessionEnd"), kwargs={"reason": "other"})
    ending.start()
    ending.join(1.0)
    assert ending.is_alive() and host.state(0) == "working"  # waiting its turn: nothing written yet
    earlier.served()
    ending.join(60)
    assert not ending.is_alive() and host.state(0) == "ended"
    # a run that took a ticket and died: the next waits out its budget, then writes all the same
    _ticket_in(tmp_path / "state" / "sessionwatch", _thread(1))
    host.fire(1, "SessionStart", source="startup")
    wait_until(lambda: host.state(1) == "idle", timeout=60, what="the start written after the dead run's turn")


def test_a_run_the_host_takes_no_answer_from_lets_the_host_go_on_and_still_writes_in_turn(tmp_path: Path) -> None:
    """A permission request fired while the prompt before it is still being written (its ticket out and
    unserved, as on a busy machine): once the hook's budget is spent the host has its answer, and the
    request is written after the prompt, not in its place (where the prompt's ``working`` would be
    dropped as late)."""
    host = Host(tmp_path)
    host.fire(0, "SessionStart", source="startup")
    wait_until(lambda: host.state(0) == "idle", timeout=60, what="the session started")
    earlier = _ticket_in(tmp_path / "state" / "sessionwatch", _thread(0))  # the prompt, still writing
    host.fire(0, "PermissionRequest", tool_name="Bash", tool_input={"command": "ls"})  # returned: answered
    assert host.state(0) == "idle"  # not written in the prompt's place
    earlier.served()
    wait_until(lambda: host.state(0) == "waiting", timeout=60, what="the request written after its turn came")


def _ticket_in(state: Path, thread: str) -> order.Ticket:
    import sessionwatch.hooks.order as module

    saved = os.environ.get("SESSIONWATCH_STATE_DIR")
    os.environ["SESSIONWATCH_STATE_DIR"] = str(state)
    try:
        taken = module.ticket("claude-code", thread)
    finally:
        if saved is None:
            os.environ.pop("SESSIONWATCH_STATE_DIR")
        else:
            os.environ["SESSIONWATCH_STATE_DIR"] = saved
    assert taken is not None
    return taken


def test_a_ticket_waits_for_the_ones_before_it_and_not_for_a_dead_one(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SESSIONWATCH_STATE_DIR", str(tmp_path))
    first, second = order.ticket("claude-code", "s-1"), order.ticket("claude-code", "s-1")
    other = order.ticket("claude-code", "s-2")
    assert first is not None and second is not None and other is not None
    assert (first.number, second.number, other.number) == (1, 2, 1)  # each host session its own order
    assert first.wait_turn(0) and other.wait_turn(0)
    assert not second.wait_turn(0.05)  # its predecessor has not written yet
    first.served()
    assert second.wait_turn(0)
    third = order.ticket("claude-code", "s-1")
    assert third is not None and not third.wait_turn(0.05)  # the second never said it was done ...
    assert order.ticket("claude-code", None) is None and order.ticket("", "s-1") is None
