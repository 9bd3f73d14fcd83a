"""Each host session its own key, and a host's subagents as children, with the real hosts.

``sessionwatch install HOST`` without ``--session`` in a project folder named ``project``: every Claude
Code or Codex session that runs there becomes ``agent:project:claude:<its id>`` (or ``codex``) on its
first event, adopted (its transcript linked); a resumed session keeps its key. A subagent the host starts
becomes ``agent:project:subagent:<host agent id>``, spawned by (and watched from) its session; its stop
ends the run, which tells the parent once.
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
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

WIRE: dict[str, Wire] = {"claude-code": "anthropic", "codex": "openai"}
CATALOG = {"claude-code": "claude", "codex": "codex"}
TASK = "SUBTASK-9 say hello"


class Project:
    def __init__(self, host: str, h: HostHome, model: FakeModel, mode: str) -> None:
        self.host, self.h, self.model = host, h, model
        self.server: subprocess.Popen[bytes] | None = None
        state = h.root / "state"
        h.extra_env["XDG_STATE_HOME"] = str(state)
        self.store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        where: list[str] = []
        if mode == "gateway":  # Claude Code's hooks post to the gateway's own-key route, SessionStart aside
            from tests.support.ports import listening_socket, spawn_serving, url_of
            from tests.support.waiting import wait_http

            (state / "sessionwatch").mkdir(parents=True)
            Gateway.open(self.store, timers=False).close()
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
            [*SESSIONWATCH, *where, "install", host, "--dir", str(h.project)],
            capture_output=True,
            text=True,
            env=h.env(),
            timeout=180,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        if mode == "gateway":
            settings = json.loads((h.project / ".claude" / "settings.json").read_text())
            (handler,) = settings["hooks"]["UserPromptSubmit"][0]["hooks"]
            assert handler["type"] == "http" and "/v1/hooks/claude-code?agentId=project" in handler["url"]

    def gw(self) -> Gateway:
        return Gateway.open(self.store, timers=False)

    def run(self, prompt: str, *more: str) -> None:
        res = self.h.prompt(prompt, *more)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    def own_keys(self) -> list[str]:
        prefix = f"agent:project:{CATALOG[self.host]}:"
        with self.gw() as gw:
            rows = gw.call_tool("sessions_list", {"limit": 100}, caller="agent:project:observer")
        return sorted(s["sessionKey"] for s in rows["sessions"] if s["sessionKey"].startswith(prefix))

    def resume(self, session_id: str, prompt: str) -> None:
        if self.host == "claude-code":
            self.run(prompt, "--resume", session_id)
        else:
            res = self.h.run("exec", "--skip-git-repo-check", "resume", session_id, prompt)
            assert res.returncode == 0, res.stderr[-2000:]

    def new_input(self, i: int) -> str:
        """What request ``i`` added to the previous request's input."""
        now = self.model.texts(self.model.requests[i])
        fresh = list(now)
        for t in self.model.texts(self.model.requests[i - 1]) if i else []:
            if t in fresh:
                fresh.remove(t)
        return "\n".join(fresh)

    def hook_log(self) -> str:
        path = self.h.root / "state" / "sessionwatch" / "hooks.log"
        return path.read_text()[-4000:] if path.exists() else "(no hooks.log)"

    def host_session_ids(self) -> list[str]:
        """The host's own session ids, from its transcripts on disk."""
        if self.host == "claude-code":
            return sorted(p.stem for p in (self.h.home / ".claude" / "projects").rglob("*.jsonl"))
        ids = []
        for p in (self.h.home / ".codex" / "sessions").rglob("rollout-*.jsonl"):
            meta = json.loads(p.read_text().splitlines()[0])
            if meta.get("payload", {}).get("thread_source") != "subagent":
                ids.append(str(meta["payload"]["id"]))
        return sorted(ids)


@pytest.fixture(params=["claude-code", "codex", "claude-code/gateway"])
def project(request: Any, tmp_path: Path) -> Iterator[Project]:
    host, _, mode = str(request.param).partition("/")
    with FakeModel(WIRE[host], default="noted") as model, host_home(host, tmp_path, model.url) as h:
        p = Project(host, h, model, mode or "local")
        try:
            with p.gw() as gw:
                gw.put_session("agent:project:observer")
            yield p
        finally:
            if p.server is not None:
                from tests.support.procs import stop

                stop(p.server)


def test_two_sessions_in_one_folder_get_two_keys_and_a_resumed_one_keeps_its_own(project: Project) -> None:
    project.run("first")
    project.run("second")
    ids = project.host_session_ids()
    assert len(ids) == 2, ids
    expected = sorted(f"agent:project:{CATALOG[project.host]}:{sid}" for sid in ids)
    assert project.own_keys() == expected, project.hook_log()
    with project.gw() as gw:
        for key in expected:  # adopted: a person typing into it later is detected
            link = gw.link(key)
            assert link is not None and link["threadId"] == key.rsplit(":", 1)[1], project.hook_log()
    project.resume(ids[0], "third")
    assert project.own_keys() == expected  # the resumed session is the same key, no third one


def _subagent_script(project: Project) -> None:
    """The main agent starts one subagent that only answers; the main agent then finishes."""
    done_sub = threading.Event()

    def is_sub(request: dict[str, Any]) -> bool:
        if project.host == "claude-code":
            first = (request.get("messages") or [{}])[0]
            return TASK in json.dumps(first) and "delegate" not in json.dumps(first)
        return "delegate" not in json.dumps(request.get("input"))

    def respond(request: dict[str, Any]) -> Reply:
        done = project.model.tool_results(request)
        if is_sub(request):
            done_sub.set()
            return Reply.say("hello from the subagent")
        if "delegate" not in json.dumps(request):
            return Reply.say("ok")  # the host's own side requests
        if project.host == "claude-code":
            if not done:
                return Reply.call("Agent", {"description": "hi", "prompt": TASK, "subagent_type": "general-purpose"})
            done_sub.wait(120)
            return Reply.say("main done")
        if not done:
            return Reply.call("multi_agent_v1__spawn_agent", {"message": TASK})
        if len(done) == 1:
            agent = json.loads(done[0])["agent_id"]
            return Reply.call("multi_agent_v1__wait_agent", {"targets": [agent], "timeout_ms": 60000})
        return Reply.say("main done")

    project.model.respond = respond


def test_a_subagent_is_a_child_its_parent_watches_and_its_stop_tells_the_parent_once(project: Project) -> None:
    _subagent_script(project)
    project.run("delegate the greeting")
    (parent,) = project.own_keys()
    with project.gw() as gw:
        children = [
            s
            for s in gw.call_tool("sessions_list", {"limit": 100}, caller=parent)["sessions"]
            if s["sessionKey"].startswith("agent:project:subagent:")
        ]
        assert len(children) == 1, project.hook_log()
        child = children[0]["sessionKey"]
        assert children[0].get("spawnedBy") == parent
        assert any(c["target"] == child for c in gw.cursors(watcher=parent)), "the parent does not watch its child"
        kinds = [e["kind"] for e in gw.events_after(0, 1000) if e["sessionKey"] == child]
        assert "child_spawned" in kinds and "run_completed" in kinds, kinds
    # The end of the child's run is told to the parent once: in this turn (a hook after the subagent's
    # stop) or, when none came, at the parent's next prompt; never twice, and then it is acknowledged.
    project.model.respond = None
    project.resume(parent.rsplit(":", 1)[1], "and now?")
    needle = f'Session "{child}" changed (other actor)'
    told = [i for i in range(len(project.model.requests)) if needle in project.new_input(i)]
    assert len(told) == 1, f"told {len(told)} times; hooks.log:\n{project.hook_log()}"
    with project.gw() as gw:
        assert gw.peek_system_events(parent) == []


def test_a_subagent_that_fails_ends_failed_and_its_parent_is_told_once(project: Project) -> None:
    """The subagent's model request is refused: the host fires no SubagentStop for it, but tells the
    parent (Claude Code: a task notification as its next prompt; Codex: the wait_agent result), and the
    hook ends the child failed: run_failed, state ended (failed), the parent told once."""
    sub_failed = threading.Event()
    script_main = project.host == "claude-code"

    def respond(request: dict[str, Any]) -> Reply:
        body = json.dumps(request)
        first = json.dumps((request.get("messages") or [{}])[0]) if script_main else body
        if TASK in first and "delegate" not in first:  # the subagent's own request
            sub_failed.set()
            return Reply.fail(400, "the model refuses the subagent")
        if "delegate" not in body:
            return Reply.say("ok")  # the host's own side requests
        done = project.model.tool_results(request)
        if script_main:
            if not done:
                return Reply.call("Agent", {"description": "hi", "prompt": TASK, "subagent_type": "general-purpose"})
            sub_failed.wait(120)
            return Reply.say("main done")
        if not done:
            return Reply.call("multi_agent_v1__spawn_agent", {"message": TASK})
        if len(done) == 1:
            agent = json.loads(done[0])["agent_id"]
            return Reply.call("multi_agent_v1__wait_agent", {"targets": [agent], "timeout_ms": 60000})
        return Reply.say("main done")

    project.model.respond = respond
    project.run("delegate the greeting")
    (parent,) = project.own_keys()
    with project.gw() as gw:
        children = [
            s["sessionKey"]
            for s in gw.call_tool("sessions_list", {"limit": 100}, caller=parent)["sessions"]
            if s["sessionKey"].startswith("agent:project:subagent:")
        ]
        assert len(children) == 1, project.hook_log()
        (child,) = children

        def ended() -> dict[str, Any] | None:
            state = gw.lifecycle_of(child, "project") or {}
            return state if state.get("state") == "ended" else None

        state = wait_until(ended, timeout=60, what=f"the child ended; {project.hook_log()}")
        assert state["outcome"] == "failed", state
        kinds = [e["kind"] for e in gw.events_after(0, 1000) if e["sessionKey"] == child]
        assert "run_failed" in kinds and "run_completed" not in kinds, kinds
    project.model.respond = None
    project.resume(parent.rsplit(":", 1)[1], "and now?")
    needle = f'Session "{child}" changed (other actor)'
    told = [i for i in range(len(project.model.requests)) if needle in project.new_input(i)]
    assert len(told) == 1, f"told {len(told)} times; hooks.log:\n{project.hook_log()}"


def test_the_mcp_server_stands_for_the_host_sessions_own_key(project: Project) -> None:
    """Installed without --session, the server the host starts serves the host session's own key: Claude
    Code hands it the session id; Codex names the thread in each tool call. The model's own status call
    is about its own session."""
    project.model.script(Reply.call("mcp__sessionwatch__session_status", {}), Reply.say("fine"))
    project.run("who am I?")
    (own,) = project.own_keys()
    results = project.model.tool_results(project.model.requests[-1])
    assert results and own in results[-1], results


def _kinds_of(project: Project, key: str) -> list[str]:
    with project.gw() as gw:
        return [e["kind"] for e in gw.events_after(0, 1000) if e["sessionKey"] == key]


def test_a_turn_is_working_a_permission_prompt_waiting_and_the_end_ended(project: Project) -> None:
    """A tool that needs the person's permission: the host asks (a headless run then refuses it), the
    session shows waiting, then the turn ends (idle) and the run ends (ended), each a typed event. Codex
    asks only in its TUI (``codex exec`` never does): there the person approves, and the session works
    again, then the turn ends."""
    if project.host == "codex":
        _a_codex_tui_waits_for_its_approval(project)
        return
    project.model.script(Reply.call("Bash", {"command": "touch made-by-tool", "description": "make"}), Reply.say("ok"))
    project.run("make a file")
    (own,) = project.own_keys()
    # The prompt's and the turn end's reports are written after the hook answered (detached), so a late
    # one can lose to the next (a report older than the state it would replace changes nothing).
    states = [k for k in _kinds_of(project, own) if k.startswith("session_")]
    order = [s for s in states if s in ("session_working", "session_waiting", "session_ended")]
    assert order == ["session_working", "session_waiting", "session_ended"], (states, project.hook_log())
    with project.gw() as gw:
        out = gw.call_tool("sessions_list", {"lifecycle": ["ended"]}, caller="agent:project:observer")
        assert [s["sessionKey"] for s in out["sessions"]] == [own]
        assert out["sessions"][0]["lifecycle"]["state"] == "ended"


def _a_codex_tui_waits_for_its_approval(project: Project) -> None:
    """A Codex TUI asks before a command the sandbox does not allow (read-only, approval on request): the
    model asks for an escalated ``exec_command``; while the TUI asks (it says ``blocked``) the session is
    waiting and the command has not run; the person approves (``y``), the command runs, the session works
    again, then its turn ends."""
    import time

    from tests.support.codex_tui import codex_tui, trust_project, tui_state

    h, model = project.h, project.model
    made = h.project / "made-by-tool"
    trust_project(h, 'approval_policy = "on-request"\nsandbox_mode = "read-only"\n')

    working_again = threading.Event()

    def state() -> str | None:
        keys = project.own_keys()
        with project.gw() as gw:
            return (gw.lifecycle_of(keys[0], "project") or {}).get("state") if len(keys) == 1 else None

    def respond(request: dict[str, Any]) -> Reply:
        body = json.dumps(request)
        if "function_call_output" in body:
            # the turn goes on after the approved command (the model answers once the session shows
            # working again: a turn that ended at once could end before that report is written, and
            # its late report would then be ignored, as the rules say)
            working_again.wait(60)
            return Reply.say("made it")
        # likewise the prompt's working is written (after its hook answered) before the request to ask
        wait_until(lambda: state() == "working", timeout=60, interval=0.1, what="working")
        return Reply.call(
            "exec_command",
            {"cmd": "touch made-by-tool", "sandbox_permissions": "require_escalated", "justification": "asked"},
        )

    model.respond = respond
    with codex_tui(h) as tui:
        tui.type("make a file")
        wait_until(lambda: state() == "waiting", timeout=90, interval=0.2, what=f"waiting; {project.hook_log()}")
        (own,) = project.own_keys()
        with project.gw() as gw:
            listed = gw.call_tool("sessions_list", {"lifecycle": "waiting"}, caller="agent:project:observer")
        assert [s["sessionKey"] for s in listed["sessions"]] == [own]
        wait_until(lambda: tui_state(tui) == "blocked", timeout=30, what="the TUI asking the person")
        assert not made.exists()  # nothing ran
        # the person approves: ``y`` (again, should the TUI not have taken it: it asks until it gets one)
        pressed: list[float] = []

        def approved() -> bool:
            if made.exists():
                return True
            if not pressed or time.monotonic() - pressed[-1] > 3:
                pressed.append(time.monotonic())
                tui.type("y", enter=False)
            return False

        wait_until(approved, timeout=90, interval=0.2, what="the approved command run")
        wait_until(lambda: state() == "working", timeout=90, interval=0.2, what=f"working; {project.hook_log()}")
        working_again.set()
        wait_until(lambda: state() == "idle", timeout=90, interval=0.2, what=f"idle; {project.hook_log()}")
        assert made.exists()
    states = [k for k in _kinds_of(project, own) if k.startswith("session_")]
    turn = states[states.index("session_working") :]
    assert turn == ["session_working", "session_waiting", "session_working", "session_idle"], (
        states,
        project.hook_log(),
    )


LOST_AFTER_MS = 2000  # the gateway's lost limit in these tests; its timer looks every quarter of it


class Served:
    """A ``sessionwatch serve`` on the project's store: the gateway whose own timer decides ``lost``."""

    def __init__(self, h: HostHome, store: str) -> None:
        from tests.support.ports import listening_socket, spawn_serving, url_of
        from tests.support.waiting import wait_http

        sock = listening_socket()
        self.url = url_of(sock)
        self.log = h.root / "serve.log"
        with open(self.log, "wb") as out:
            self.proc = spawn_serving(
                [*SESSIONWATCH, "serve", "--store", store, "--no-monitor"], sock, stdout=out, stderr=out, env=h.env()
            )
        wait_http(f"{self.url}/v1/health", self.proc, timeout=60, log=self.log)

    def stop(self) -> None:
        from tests.support.procs import stop

        stop(self.proc)


class Hung:
    """The fake model holds the turn's request until ``release`` (a turn busy in the model, no hook
    running); side requests (Codex's title) are answered at once."""

    def __init__(self, model: FakeModel) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        model.respond = self.respond

    def respond(self, request: dict[str, Any]) -> Reply:
        self.started.set()
        self.release.wait(600)
        return Reply.say("done")


def _own_key(gw: Gateway, catalog: str, state: str) -> str | None:
    listed = gw.call_tool("sessions_list", {"lifecycle": state}, caller="agent:project:observer")["sessions"]
    keys = [s["sessionKey"] for s in listed if s["sessionKey"].startswith(f"agent:project:{catalog}:")]
    return keys[0] if len(keys) == 1 else None


def _lost_events(gw: Gateway, key: str) -> list[dict[str, Any]]:
    return [e for e in gw.events_after(0, 1000) if e["sessionKey"] == key and e["kind"] == "session_lost"]


@pytest.mark.parametrize("host", ["claude-code", "codex", "codex-tui"])
def test_a_host_killed_while_working_is_lost_and_its_watcher_told_once(host: str, tmp_path: Path) -> None:
    """A host session with its own key (installed without --session), watched by a manager, is busy in
    the model (no hook runs): silent past the gateway's lost limit while its process lives, it stays
    working. Killed (kill -9 of its process group; for the Codex TUI, the TUI, whose daemon runs on),
    the gateway's own timer makes it lost, once, and the manager is told once; top, /metrics and the
    dashboard show it."""
    import os
    import signal
    import time

    from tests.support.codex_tui import codex_tui, trust_project

    program = host.removesuffix("-tui")
    catalog = CATALOG[program]
    manager = "agent:project:observer"
    with FakeModel(WIRE[program], default="noted") as model, host_home(program, tmp_path, model.url) as h:
        state = h.root / "state"
        h.extra_env["XDG_STATE_HOME"] = str(state)
        h.extra_env["SESSIONWATCH_LOST_AFTER_MS"] = str(LOST_AFTER_MS)
        store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        (state / "sessionwatch").mkdir(parents=True)
        with Gateway.open(store, timers=False) as gw:
            gw.put_session(manager)
        out = subprocess.run(
            [*SESSIONWATCH, "install", program, "--dir", str(h.project)],
            capture_output=True,
            text=True,
            env=h.env(),
            timeout=180,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        served = Served(h, store)
        hung = Hung(model)
        proc: subprocess.Popen[bytes] | None = None
        tui_cm = None
        try:
            if host == "codex-tui":
                trust_project(h)
                tui_cm = codex_tui(h)
                tui = tui_cm.__enter__()
                tui.type("long job")
            else:
                argv = ["-p", "long job"] if program == "claude-code" else ["exec", "--skip-git-repo-check", "long job"]
                proc = subprocess.Popen(
                    [str(h.binary), *argv],
                    cwd=h.project,
                    env=h.env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            assert hung.started.wait(120), f"the turn never reached the model; hooks.log:\n{h.hook_log()}"
            with Gateway.open(store, timers=False) as gw:  # reads only: the served gateway runs the timer
                key = wait_until(lambda: _own_key(gw, catalog, "working"), timeout=60, what="the session working")
                assert gw.watch(manager, key)
                # Quiet for longer than the limit (several of the timer's looks), its process alive: not lost.
                time.sleep(3 * LOST_AFTER_MS / 1000)
                assert (gw.lifecycle_of(key, "project") or {}).get("state") == "working", h.hook_log()
                assert _lost_events(gw, key) == []

                if tui_cm is not None:
                    tui.close()  # the TUI and its process group; the daemon runs on, the turn hung in it
                else:
                    assert proc is not None
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(30)
                wait_until(
                    lambda: (gw.lifecycle_of(key, "project") or {}).get("state") == "lost",
                    timeout=60,
                    interval=0.2,
                    what=f"{key} lost; hooks.log:\n{h.hook_log()}",
                )
                if host == "codex-tui":  # lost although the daemon that ran its hooks (and its turn) lives
                    from sessionwatch.engine.lifecycle import process_alive
                    from tests.support.codex_tui import daemon_pids

                    assert any(process_alive(pid) for pid in daemon_pids(h)), "the daemon is gone"
                time.sleep(2 * LOST_AFTER_MS / 1000)  # more of the timer's looks: nothing more is recorded
                assert len(_lost_events(gw, key)) == 1
                notices = gw.peek_system_events(manager)
                assert len(notices) == 1 and key in notices[0]["line"], notices
                listed = gw.call_tool("sessions_list", {"lifecycle": "lost"}, caller=manager)["sessions"]
                assert [s["sessionKey"] for s in listed] == [key]
            _shown_lost(h, store, served, key, dashboard=host == "claude-code")
        finally:
            hung.release.set()
            if tui_cm is not None:
                tui_cm.__exit__(None, None, None)
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            served.stop()


def _shown_lost(h: HostHome, store: str, served: Served, key: str, *, dashboard: bool) -> None:
    """``sessionwatch top``, the gateway's /metrics and (``dashboard``) the dashboard in Chromium show
    the session lost."""
    import httpx

    out = subprocess.run(
        [*SESSIONWATCH, "--store", store, "--json", "top", "--once"],
        capture_output=True,
        text=True,
        env=h.env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    frame = json.loads(out.stdout)
    assert frame["lifecycle"].get("lost") == 1, frame["lifecycle"]
    assert [(s["sessionKey"], s["state"]) for s in frame["sessions"] if s["state"] == "lost"] == [(key, "lost")]
    metrics = httpx.get(f"{served.url}/metrics", timeout=30).text
    assert 'sessionwatch_sessions_lifecycle{state="lost"} 1.0' in metrics, metrics[-2000:]
    if not dashboard:
        return
    from tests.http import test_dashboard_browser as ui

    if ui.CHROMIUM is None:
        pytest.skip("no chromium on this machine: the dashboard's badge was not looked at (all else passed)")
    with ui.sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ui.CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(served.url + "/ui")
            badge = page.wait_for_selector(f'li[data-session="{key}"] .badge.state-lost', timeout=30_000)
            assert badge is not None and badge.inner_text().startswith("lost")
        finally:
            browser.close()
