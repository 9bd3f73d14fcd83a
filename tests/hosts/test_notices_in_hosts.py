"""Notices through the real hosts after ``sessionwatch install``: what the model receives, and when.

A manager session runs in the host (Claude Code, Codex CLI), bound with ``--session``; it watches a child;
"a person writes into the child" is the change. The fake model records every request, so each test reads
exactly what reached the model: once, in the same turn as the change, never in a subagent's context, and
at the end of a turn as the reason the turn goes on (once, never looping).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply, Wire
from tests.support.hosts import HostHome, host_home

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

MANAGER, CHILD = "agent:main:main", "agent:main:subagent:researcher"
WIRE: dict[str, Wire] = {"claude-code": "anthropic", "codex": "openai"}
CHANGED = "changed (other actor)"


class World:
    def __init__(self, host: str, h: HostHome, model: FakeModel, mode: str = "local") -> None:
        self.host, self.h, self.model, self.mode = host, h, model, mode
        self.server: subprocess.Popen[bytes] | None = None
        state = h.root / "state"
        h.extra_env["XDG_STATE_HOME"] = str(state)  # the default store, the hook's state, install snapshots
        self.store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        (state / "sessionwatch").mkdir(parents=True)
        self.gw = Gateway.open(self.store, timers=False)
        self.gw.put_session(MANAGER)
        self.gw.put_session(CHILD)
        assert self.gw.watch(MANAGER, CHILD)
        where: list[str] = []
        if mode == "gateway":  # Claude Code's hooks then post to the gateway (HTTP hooks), SessionStart aside
            from tests.support.ports import listening_socket, spawn_serving, url_of
            from tests.support.waiting import wait_http

            sock = listening_socket()
            url = url_of(sock)
            self.server = spawn_serving(
                [*SESSIONWATCH, "serve", "--store", self.store, "--no-monitor"],
                sock,
                stderr=subprocess.DEVNULL,
                env=h.env(),
            )
            wait_http(f"{url}/v1/health", self.server, timeout=60)
            where = ["--gateway", url]
        out = subprocess.run(
            [*SESSIONWATCH, *where, "install", host, "--dir", str(h.project), "--session", MANAGER],
            capture_output=True,
            text=True,
            env=h.env(),
            timeout=180,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        (h.project / "notes.txt").write_text("the brief is due on Friday\n")

    def person_writes_into_child(self, text: str = "use the 2024 brief") -> str:
        """The change; the manager's pending notice line."""
        self.gw.inbound(CHILD, text, channel="webchat")
        entries = self.gw.peek_system_events(MANAGER)
        assert entries, "no notice queued"
        return str(entries[-1]["line"])

    def read_tool(self) -> Reply:
        if self.host == "claude-code":
            return Reply.call("Read", {"file_path": str(self.h.project / "notes.txt")})
        return Reply.call("exec_command", {"cmd": "cat notes.txt"})

    def run(self, prompt: str) -> None:
        res = self.h.prompt(prompt)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    def hook_log(self) -> str:
        """The hooks' own log (what each run did, and why it gave nothing), for a failure's message."""
        path = self.h.root / "state" / "sessionwatch" / "hooks.log"
        return path.read_text()[-3000:] if path.exists() else "(no hooks.log)"

    def requests_with(self, needle: str, start: int = 0) -> list[int]:
        return [i for i in self.model.seen(needle) if i >= start]

    def new_input(self, i: int) -> str:
        """What request ``i`` added after the previous request's input: the turn's new items."""
        now = self.model.texts(self.model.requests[i])
        before = self.model.texts(self.model.requests[i - 1]) if i else []
        fresh = list(now)
        for t in before:
            if t in fresh:
                fresh.remove(t)
        return "\n".join(fresh)


@pytest.fixture(params=["claude-code", "codex", "claude-code/gateway"])
def world(request: Any, tmp_path: Path) -> Iterator[World]:
    host, _, mode = str(request.param).partition("/")
    with FakeModel(WIRE[host], default="noted") as model, host_home(host, tmp_path, model.url) as h:
        w = World(host, h, model, mode or "local")
        try:
            yield w
        finally:
            w.gw.close()
            if w.server is not None:
                from tests.support.procs import stop

                stop(w.server)


def test_a_stale_notice_reaches_the_model_once_and_not_on_the_next_prompt(world: World) -> None:
    line = world.person_writes_into_child()
    world.run("what is the status?")
    first = len(world.model.requests)
    assert world.requests_with(line), f"the notice never reached the model; hooks.log:\n{world.hook_log()}"
    assert sum(world.new_input(i).count(line) for i in range(first)) == 1  # given once, not per event
    world.run("and now?")  # a new host session of the same manager
    assert world.requests_with(line, start=first) == []
    assert world.gw.peek_system_events(MANAGER) == []  # acknowledged


def test_a_change_during_a_tool_loop_reaches_the_same_turn(world: World) -> None:
    notice: list[str] = []
    world.model.script(
        # the change lands while the host runs the tool the model asked for
        Reply(**{**world.read_tool().__dict__, "before": lambda: notice.append(world.person_writes_into_child())}),
        Reply.say("done reading"),
    )
    world.run("read notes.txt")
    assert notice and world.requests_with(notice[0]) == [1], world.hook_log()


def test_a_change_during_the_final_answer_holds_the_turn_open_once(world: World) -> None:
    notice: list[str] = []
    world.model.script(
        Reply.say("all done", before=lambda: notice.append(world.person_writes_into_child())),
        Reply.say("reconciled, all done"),
    )
    world.run("finish up")
    assert notice
    reqs = world.model.requests
    # the turn went on exactly once: the Stop hook's reason entered the conversation as the next input, and
    # no later request brought it again (a host's own call beside the turn may repeat the conversation)
    entered = [i for i in range(1, len(reqs)) if notice[0] in world.new_input(i)]
    assert entered == [1], f"the notice entered the conversation at {entered} of {len(reqs)} requests"
    assert notice[0] in world.new_input(1)  # the Stop hook's reason is the next input
    assert "--store" not in world.new_input(1) and "sqlite" not in world.new_input(1)  # no secrets shown


def test_a_subagent_never_takes_the_main_sessions_notice(world: World) -> None:
    """The change lands while a subagent runs a tool: the subagent's tool hook carries the parent's
    session id plus its agent_id and must leave the notice alone; the main agent gets it."""
    notice: list[str] = []

    def change() -> None:
        notice.append(world.person_writes_into_child())

    task = "SUBTASK-7 read notes.txt"

    def is_sub(request: dict[str, Any]) -> bool:
        """A subagent's request: it starts from the task alone, without the main prompt."""
        if world.host == "claude-code":
            first = (request.get("messages") or [{}])[0]
            return "SUBTASK-7" in json.dumps(first) and "delegate the reading" not in json.dumps(first)
        return "delegate the reading" not in json.dumps(request.get("input"))

    sub_done, main_moved_on = threading.Event(), threading.Event()

    def respond(request: dict[str, Any]) -> Reply:  # the agents run side by side: answer each by what it asks
        done = world.model.tool_results(request)
        if is_sub(request):
            if not done:
                # The change comes once the main agent has moved on (its own hooks for the spawn have
                # run), so the first hook after it is the subagent's.
                main_moved_on.wait(120)
                return Reply(**{**world.read_tool().__dict__, "before": change})
            if len(done) == 1:  # a second tool: the host has run the first one's hooks by then
                return world.read_tool()
            sub_done.set()
            return Reply.say("sub done")
        if "delegate the reading" not in json.dumps(request):
            return Reply.say("ok")  # the host's own side requests (a title, a summary)
        if done:
            main_moved_on.set()
        if world.host == "claude-code":
            if not done:
                return Reply.call("Agent", {"description": "look", "prompt": task, "subagent_type": "general-purpose"})
            # Claude Code runs the agent in the background: the main agent's next step waits for it, so
            # no hook of the main agent runs between the change and the subagent's tool hook.
            sub_done.wait(120)
            return Reply.say("main done")
        if not done:
            return Reply.call("multi_agent_v1__spawn_agent", {"message": task})
        if len(done) == 1:
            agent = json.loads(done[0])["agent_id"]
            return Reply.call("multi_agent_v1__wait_agent", {"targets": [agent], "timeout_ms": 60000})
        return Reply.say("main done")

    world.model.respond = respond
    world.run("delegate the reading")
    assert notice, "the subagent never ran its tool"
    requests = world.model.requests
    sub = [i for i, r in enumerate(requests) if is_sub(r)]
    main = [i for i in range(len(requests)) if i not in sub]
    assert sub, "no subagent request seen"
    assert not any(notice[0] in world.new_input(i) for i in sub), "a subagent's hook took the main session's notice"
    assert any(notice[0] in world.new_input(i) for i in main), "the main agent never got the notice"
