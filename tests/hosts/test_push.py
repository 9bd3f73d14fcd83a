"""A notice pushed into a running or idle Claude Code session, with the real binary.

Claude Code runs with ``--input-format stream-json``, so the session stays alive between turns (what a
person's open terminal is). The MCP server it starts for the session writes one line to its inbox socket
when a notice arrives: an idle session starts a turn and reconciles; a busy one gets the line at its next
tool boundary. The notice itself is delivered as always, once, and each notice is pushed once.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply
from tests.support.hosts import HostHome, host_home

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

MANAGER, CHILD = "agent:main:main", "agent:main:subagent:researcher"
PUSHED = "sessionwatch: a session you rely on has changed"


class Live:
    """A Claude Code session kept open on stream-json stdin, installed with ``--session MANAGER`` or
    without (then it is its own key, known after its first turn, and made to watch CHILD), on a local
    store or (``gateway``) through a gateway that keeps its hook answers in a state folder of its own."""

    def __init__(self, h: HostHome, model: FakeModel, session: str | None = MANAGER, *, gateway: bool = False) -> None:
        self.h, self.model, self.session = h, model, session
        state = h.root / "state"
        h.extra_env["XDG_STATE_HOME"] = str(state)
        self.store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        (state / "sessionwatch").mkdir(parents=True)
        self.gw = Gateway.open(self.store, timers=False)
        self.gw.put_session(CHILD)
        if session is not None:
            self.gw.put_session(session)
            assert self.gw.watch(session, CHILD)
        self.server: subprocess.Popen[bytes] | None = None
        where: list[str] = []
        if gateway:
            from tests.support.ports import listening_socket, spawn_serving, url_of
            from tests.support.waiting import wait_http

            sock = listening_socket()
            self.url = url_of(sock)
            # the gateway's own state folder: what its hook route hands out is not in the host's
            self.gateway_state = h.root / "gateway-state"
            env = {**h.env(), "XDG_STATE_HOME": str(self.gateway_state)}
            serve = [*SESSIONWATCH, "serve", "--store", self.store, "--no-monitor"]
            self.server = spawn_serving(serve, sock, stderr=subprocess.DEVNULL, env=env)
            wait_http(f"{self.url}/v1/health", self.server, timeout=60)
            where = ["--gateway", self.url]
        pin = ["--session", session] if session else []
        out = subprocess.run(
            [*SESSIONWATCH, *where, "install", "claude-code", "--dir", str(h.project), *pin],
            capture_output=True,
            text=True,
            env=h.env(),
            timeout=180,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        self.proc = subprocess.Popen(
            [
                str(h.binary),
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
            cwd=h.project,
            env=h.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.results: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def key(self) -> str:
        """The session's key (its own: known once a hook created it; it then watches CHILD)."""
        if self.session is None:
            from tests.support.waiting import wait_until

            def own() -> str | None:
                rows = self.gw.call_tool("sessions_list", {"limit": 50}, caller=CHILD)["sessions"]
                keys = [r["sessionKey"] for r in rows if r["sessionKey"].startswith("agent:project:claude:")]
                return keys[0] if len(keys) == 1 else None

            self.session = wait_until(own, timeout=60, interval=0.1, what="the session's own key")
            assert self.gw.watch(self.session, CHILD)
        return self.session

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == "result":
                self.results.put(event)

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n")
        self.proc.stdin.flush()

    def turn_done(self, timeout: float = 120) -> dict[str, Any]:
        return self.results.get(timeout=timeout)

    def person_writes_into_child(self) -> str:
        key = self.key
        self.gw.inbound(CHILD, "use the 2024 brief", channel="webchat")
        return str(self.gw.peek_system_events(key)[-1]["line"])

    def count(self, needle: str) -> int:
        """In how many model requests ``needle`` first appeared (a request repeats its history)."""
        seen = 0
        before = ""
        needle = json.dumps(needle)[1:-1]  # as it stands in the request's JSON
        for r in self.model.requests:
            now = json.dumps(r)
            seen += now.count(needle) > before.count(needle)
            before = now
        return seen

    def hook_log(self) -> str:
        path = self.h.root / "state" / "sessionwatch" / "hooks.log"
        return path.read_text()[-3000:] if path.exists() else "(no hooks.log)"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.server is not None:
            from tests.support.procs import stop

            stop(self.server)
        self.gw.close()


@pytest.fixture(params=[MANAGER, None], ids=["--session", "own-key"])
def live(request: Any, tmp_path: Path) -> Iterator[Live]:
    with FakeModel("anthropic", default="noted") as model, host_home("claude-code", tmp_path, model.url) as h:
        session = Live(h, model, request.param)
        try:
            yield session
        finally:
            session.close()


def wait_for(check: Any, timeout: float, what: Any) -> None:
    """Until ``check()``; ``what`` (a text, or a function giving one when it fails) says what never came."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.2)


def test_an_idle_session_is_pushed_once_starts_a_turn_and_gets_the_notice(live: Live) -> None:
    live.say("hello")
    live.turn_done()
    before = len(live.model.requests)
    line = live.person_writes_into_child()
    # nobody types: the push starts the turn, whose hooks deliver the notice
    wait_for(lambda: live.count(PUSHED) >= 1, 60, f"no push reached the model; hooks.log:\n{live.hook_log()}")
    live.turn_done()
    wait_for(lambda: live.count(line) >= 1, 30, f"the notice never reached the model:\n{live.hook_log()}")
    assert len(live.model.requests) > before
    time.sleep(3)  # several of the pusher's looks later
    assert live.count(PUSHED) == 1  # one push per notice
    assert live.count(line) == 1  # and the notice itself once
    assert f"you are {live.key}" in json.dumps(live.model.requests[-1])  # the push names the session


def test_a_busy_session_gets_the_push_at_its_next_tool_boundary(live: Live) -> None:
    notice: list[str] = []
    live.model.script(
        Reply.call(
            "Bash",
            {"command": "sleep 4", "description": "wait"},
            before=lambda: notice.append(live.person_writes_into_child()),
        ),
        Reply.call("Bash", {"command": "sleep 1", "description": "wait"}),
        Reply.say("done"),
    )
    live.say("run the checks")
    live.turn_done()
    assert notice
    assert live.count(PUSHED) == 1, live.hook_log()
    first = next(i for i, r in enumerate(live.model.requests) if PUSHED in json.dumps(r))
    assert first < 3, "the push came after the turn, not at its next tool boundary"  # the turn's own requests
    assert live.count(notice[0]) == 1


def test_through_a_gateway_an_idle_session_is_pushed_once(tmp_path: Path) -> None:
    """Installed with ``--gateway``: the hooks are answered by the gateway (HTTP hooks; its own state
    folder keeps their answers), the MCP server reads the queue through it; the push works the same:
    once, the notice once, no turn beyond the one it starts. (That the push leaves alone what the
    gateway's hooks handed out: tests/mcp/test_push_edges.py.)"""
    with FakeModel("anthropic", default="noted") as model, host_home("claude-code", tmp_path, model.url) as h:
        live = Live(h, model, gateway=True)
        try:
            live.say("hello")
            live.turn_done()
            line = live.person_writes_into_child()
            wait_for(lambda: live.count(PUSHED) >= 1, 60, f"no push reached the model; hooks.log:\n{live.hook_log()}")
            live.turn_done()
            wait_for(lambda: live.count(line) >= 1, 30, f"the notice never reached the model:\n{live.hook_log()}")
            time.sleep(3.5)  # several of the pusher's looks: nothing more
            assert live.count(PUSHED) == 1 and live.count(line) == 1
            assert live.results.empty()  # no turn beyond the pushed one
            assert not list((h.root / "state").rglob("hooks/*.json"))  # the answers are the gateway's
        finally:
            live.close()


class CodexTui:
    """A person's Codex TUI on a trusted project, in a pty, installed with ``--session MANAGER`` or without
    (then the session is the thread's own key, known once its first hook ran, and made to watch CHILD)."""

    def __init__(self, model: FakeModel, h: HostHome, gw: Gateway, state: Path, tui: Any, session: str | None) -> None:
        self.model, self.h, self.gw, self.state, self.tui = model, h, gw, state, tui
        self.session = session

    @property
    def key(self) -> str:
        """The Codex session's key (its own: waited for until its first hook created it, then it watches CHILD)."""
        if self.session is None:
            from tests.support.waiting import wait_until

            def own() -> str | None:
                rows = self.gw.call_tool("sessions_list", {"limit": 50}, caller=CHILD)["sessions"]
                keys = [r["sessionKey"] for r in rows if r["sessionKey"].startswith("agent:project:codex:")]
                return keys[0] if len(keys) == 1 else None

            self.session = wait_until(own, timeout=60, interval=0.1, what="the Codex session's own key")
            assert self.gw.watch(self.session, CHILD)
        return self.session

    def seen(self, needle: str) -> list[int]:
        escaped = json.dumps(needle)[1:-1]  # as it stands in a request's JSON
        return [i for i, r in enumerate(self.model.requests) if escaped in json.dumps(r)]

    def why(self) -> str:
        log = self.state / "sessionwatch" / "hooks.log"
        pushed = self.state / "sessionwatch" / "push"
        hooks = log.read_text()[-1500:] if log.exists() else "(no hooks.log)"
        where = [(p.name, p.read_text()) for p in pushed.glob("*")] if pushed.exists() else None
        return f"no push reached the model; hooks.log: {hooks}; push state: {where}"

    def pushed(self) -> bool:
        """Has the session's MCP server pushed a notice (its record of pushed ids, not a registration)?"""
        folder = self.state / "sessionwatch" / "push"
        for path in folder.glob("*.json") if folder.exists() else []:
            if not path.name.startswith("codex-") and path.read_text().strip() not in ("", "[]"):
                return True
        return False

    def turn_over(self) -> bool:
        """The TUI says its turn is done (what it shows in its terminal title; the hooks' reports of a short
        turn are written after their answers and may come in any order)."""
        from tests.support.codex_tui import tui_state

        return tui_state(self.tui) == "done"

    def person_writes_into_child(self) -> str:
        key = self.key
        self.gw.inbound(CHILD, "use the 2024 brief", channel="webchat")
        return str(self.gw.peek_system_events(key)[-1]["line"])


@contextmanager
def codex_tui(tmp_path: Path, model: FakeModel, session: str | None) -> Iterator[CodexTui]:
    from tests.support.codex_tui import codex_tui as tui_in_pty, trust_project

    with host_home("codex", tmp_path, model.url) as h:
        state = h.root / "state"
        h.extra_env["XDG_STATE_HOME"] = str(state)
        store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        (state / "sessionwatch").mkdir(parents=True)
        trust_project(h)
        (h.project / "notes.txt").write_text("the brief is due on Friday\n")
        with Gateway.open(store, timers=False) as gw:
            gw.put_session(CHILD)
            if session is not None:
                gw.put_session(session)
                assert gw.watch(session, CHILD)
            out = subprocess.run(
                [
                    *SESSIONWATCH,
                    "install",
                    "codex",
                    "--dir",
                    str(h.project),
                    *(["--session", session] if session else []),
                ],
                capture_output=True,
                text=True,
                env=h.env(),
                timeout=180,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            with tui_in_pty(h) as tui:
                yield CodexTui(model, h, gw, state, tui, session)


SESSIONS = pytest.mark.parametrize("session", [MANAGER, None], ids=["--session", "own-key"])


@SESSIONS
def test_an_idle_codex_tui_session_is_pushed_once_through_its_daemon(tmp_path: Path, session: str | None) -> None:
    """A person's Codex TUI, idle after a turn: the session's MCP server starts a turn through the TUI's
    app-server daemon; that turn's hooks deliver the notice, once, and the push comes once. Installed
    without --session, the server learns its session from what the session's hooks registered."""
    with FakeModel("openai", default="noted") as model, codex_tui(tmp_path, model, session) as c:
        c.tui.type("hello")
        wait_for(lambda: len(model.requests) >= 1, 60, f"the prompt never reached the model: {c.tui.screen[-800:]!r}")
        wait_for(c.turn_over, 60, "the turn never ended")
        line = c.person_writes_into_child()
        wait_for(lambda: c.seen(PUSHED), 60, c.why)
        wait_for(lambda: c.seen(line), 60, "the pushed turn never got the notice")
        time.sleep(4)  # the pusher's later looks
        last = json.dumps(model.requests[-1])
        assert last.count(json.dumps(PUSHED)[1:-1]) == 1  # one push in the thread's history
        assert last.count(json.dumps(line)[1:-1]) == 1  # and the notice given once
        assert f"you are {c.key}" in last  # the push names the session it was for


@SESSIONS
def test_a_busy_codex_tui_session_is_steered_within_its_running_turn(tmp_path: Path, session: str | None) -> None:
    """The notice arrives while the model is answering the person's prompt: the MCP server steers the
    running turn (``turn/steer``), so the turn's next model request already carries the push, before
    the turn ends and without a turn of its own."""
    with FakeModel("openai", default="noted") as model, codex_tui(tmp_path, model, session) as c:
        notice: list[str] = []

        def meanwhile() -> None:
            notice.append(c.person_writes_into_child())
            # the request stays in flight until the pusher (it looks every second) has steered the turn
            deadline = time.monotonic() + 30
            while not c.pushed() and time.monotonic() < deadline:
                time.sleep(0.2)

        model.script(Reply.call("exec_command", {"cmd": "cat notes.txt"}, before=meanwhile), Reply.say("done"))
        c.tui.type("run the checks")
        wait_for(lambda: bool(notice), 90, f"the turn never reached the model: {c.tui.screen[-800:]!r}")
        wait_for(c.turn_over, 90, "the turn never ended")
        pushed = c.seen(PUSHED)
        assert pushed, c.why()
        # the steer joined the running turn: the turn's second request (after the tool's output) has it
        # (Codex's title request beside the turn is a side call: never among the turn's requests)
        assert pushed[0] == 1, (pushed, c.why())
        # and no turn of its own: one working spell, from the person's prompt to the end
        status = c.gw.call_tool("session_status", {"sessionKey": c.key, "changesSince": 0}, caller=CHILD)
        spells = [e["kind"] for e in status["stateChanges"]["events"] if e["kind"] == "session_working"]
        assert spells == ["session_working"], status["stateChanges"]["events"]
        time.sleep(3)  # the pusher's later looks
        last = json.dumps(model.requests[-1])
        assert last.count(json.dumps(PUSHED)[1:-1]) == 1  # one push
        assert c.seen(notice[0]), "the notice itself never reached the model"
