"""A hook that hands over a full queue says how many more watched sessions changed (issue 19, item 3).

The queue holds 20 entries; a manager whose 30 children changed has 20 notices queued and 10 evicted
by the cap. The hook's answer must not let the agent believe it saw every change: after the 20 notice
lines comes one line saying 10 more changed and how to find them. The line is not a queue entry, so
the next run acknowledges the 20 ids exactly as before, the 10 come then, and no line follows them.

Real ``sessionwatch hook`` subprocesses on a real SQLite store, JSON on stdin as the hosts send it, and
one run through a real gateway (its hook route answers, so the line comes from there).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.notices import notice_text, withheld_line
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

MANAGER = "agent:main:main"
MORE = "more watched session"  # what only the withheld line says


class Manager:
    """A manager session whose children each had a person type into them: one notice per child."""

    def __init__(self, tmp: Path, children: int) -> None:
        self.store_url = f"sqlite:///{tmp / 'sw.db'}"
        self.env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}
        for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_TOKEN"):
            self.env.pop(name, None)
        self.gw = Gateway.open(self.store_url, timers=False)
        self.gw.put_session(MANAGER)
        self.notices: dict[str, str] = {}  # child -> the notice text it must come with
        for i in range(children):
            spawned = self.gw.call_tool("sessions_spawn", {"label": f"kid-{i:02d}"}, caller=MANAGER)
            child = spawned["sessionKey"]
            self.gw.inbound(child, f"person {i}: change of plan", channel="webchat")
            self.notices[child] = notice_text(child, spawned["stateVersion"])
        self.thread = str(uuid.uuid4())

    def hook(self, host: str, event: str, *where: str) -> str:
        """One hook run for the manager; returns what it gave the model ("" for nothing)."""
        payload: dict[str, Any] = {"session_id": self.thread, "cwd": "/home/dev/acme", "hook_event_name": event}
        if event == "UserPromptSubmit":
            payload["prompt"] = "how are the children doing?"
        if event == "Stop":
            payload["stop_hook_active"] = False
        if host == "codex":
            payload.update(model="gpt-5.3-codex", turn_id=str(uuid.uuid4()), transcript_path=None)
        cmd = [*SESSIONWATCH, *(where or ("--store", self.store_url)), "hook", host, "--session", MANAGER]
        res = subprocess.run(
            [*cmd, "--no-nudge", "--log-file", "-"],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=self.env,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr.decode()
        out = res.stdout.decode()
        if not out:
            return ""
        answer = json.loads(out)
        if event == "Stop":
            assert answer["decision"] == "block"
            return str(answer["reason"])
        assert answer["hookSpecificOutput"]["hookEventName"] == event
        return str(answer["hookSpecificOutput"]["additionalContext"])

    def texts(self, lines: list[str]) -> set[str]:
        """The notice texts among context lines (``System: [<time>] <text>``)."""
        return {line.split("] ", 1)[1] for line in lines if line.startswith("System: [")}


@pytest.fixture
def make(tmp_path: Path) -> Any:
    made: list[Manager] = []

    def build(children: int) -> Manager:
        made.append(Manager(tmp_path, children))
        return made[-1]

    yield build
    for m in made:
        m.gw.close()


@pytest.mark.parametrize(
    ("host", "event"), [("claude-code", "UserPromptSubmit"), ("codex", "UserPromptSubmit"), ("claude-code", "Stop")]
)
def test_thirty_changed_children_twenty_notices_then_a_line_then_the_other_ten(
    make: Any, host: str, event: str
) -> None:
    m = make(30)
    first = m.hook(host, event).splitlines()
    assert len(first) == 21, first
    assert all(line.startswith("System: [") for line in first[:20])
    assert first[20] == withheld_line(10)
    assert first[20].startswith("System: 10 more watched sessions changed;")
    assert "sessions_list" in first[20] and "session_status" in first[20] and "changesSince" in first[20]
    assert len(m.gw.peek_system_events(MANAGER)) == 20  # the line is no entry: the 20 wait for their ack

    second = m.hook(host, "UserPromptSubmit").splitlines()  # acknowledges the 20; the evicted 10 come now
    assert len(second) == 10 and not any(MORE in line for line in second), second
    assert m.texts(first) | m.texts(second) == set(m.notices.values())  # all 30, each once
    assert not m.texts(first) & m.texts(second)

    assert m.hook(host, "UserPromptSubmit") == ""  # nothing left, no line
    # acknowledged by the run's detached part (it printed nothing: the 10 were given already)
    wait_until(lambda: m.gw.peek_system_events(MANAGER) == [], timeout=60, what="the 10 acknowledged")


@pytest.mark.parametrize("children", [1, 20])
def test_no_line_when_nothing_is_withheld(make: Any, children: int) -> None:
    m = make(children)
    context = m.hook("claude-code", "UserPromptSubmit").splitlines()
    assert len(context) == children and not any(MORE in line for line in context), context
    assert m.texts(context) == set(m.notices.values())
    assert m.hook("claude-code", "UserPromptSubmit") == ""


def test_one_child_too_many_says_one_more(make: Any) -> None:
    m = make(21)
    assert m.hook("claude-code", "UserPromptSubmit").splitlines()[-1] == withheld_line(1)
    assert withheld_line(1).startswith("System: 1 more watched session changed;")
    last = m.hook("claude-code", "UserPromptSubmit").splitlines()
    assert len(last) == 1 and MORE not in last[0]


def test_a_queue_full_of_other_entries_says_how_many_notices_wait_behind_them(make: Any) -> None:
    """20 ordinary system events evicted the 3 notices: the answer says 3 watched sessions changed."""
    m = make(3)
    for i in range(20):
        m.gw.enqueue_system_event(MANAGER, f"deploy step {i} done")
    context = m.hook("claude-code", "UserPromptSubmit").splitlines()
    assert len(context) == 21 and context[-1] == withheld_line(3), context
    assert not m.texts(context) & set(m.notices.values())
    after = m.hook("claude-code", "UserPromptSubmit").splitlines()
    assert m.texts(after) == set(m.notices.values()) and len(after) == 3


def test_through_a_running_gateway_its_hook_route_adds_the_line(make: Any) -> None:
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    m = make(25)
    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", m.store_url, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=m.env,
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=30)
        first = m.hook("codex", "UserPromptSubmit", "--gateway", url).splitlines()
        assert len(first) == 21 and first[-1] == withheld_line(5), first
        second = m.hook("codex", "UserPromptSubmit", "--gateway", url).splitlines()
        assert len(second) == 5 and not any(MORE in line for line in second), second
        assert m.texts(first) | m.texts(second) == set(m.notices.values())
    finally:
        stop(server)
