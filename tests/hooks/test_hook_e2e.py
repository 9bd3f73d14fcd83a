"""End to end through real hook processes, inputs shaped as the hosts document them.

Claude Code ("Hooks reference", https://code.claude.com/docs/en/hooks) sends every hook the common
fields session_id, transcript_path, cwd, permission_mode and hook_event_name, plus ``prompt`` on
UserPromptSubmit and ``source`` on SessionStart; Codex ("Hooks", https://developers.openai.com/codex/hooks)
adds ``model`` and, on UserPromptSubmit, ``turn_id``. A hook answers on stdout with
``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`` and exits 0.

The worker is a real Claude transcript adopted onto a session the manager watches; the hooks run as
``sessionwatch`` subprocesses on the same SQLite file as an in-process gateway.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until
from tests.upstream.writers import ClaudeTranscript

MANAGER = "agent:main:main"


def claude_input(event: str, session_id: str, transcript: str, **extra: Any) -> dict[str, Any]:
    out = {
        "session_id": session_id,
        "transcript_path": transcript,
        "cwd": "/home/dev/acme-api",
        "permission_mode": "default",
        "hook_event_name": event,
    }
    out.update(extra)
    return out


def codex_input(event: str, session_id: str, transcript: str | None, **extra: Any) -> dict[str, Any]:
    out = {
        "session_id": session_id,
        "transcript_path": transcript,
        "cwd": "/home/dev/acme-api",
        "hook_event_name": event,
        "model": "gpt-5.3-codex",
        "permission_mode": "default",
    }
    out.update(extra)
    return out


class World:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store_url = f"sqlite:///{tmp / 'sw.db'}"
        self.claude_root = tmp / "claude"
        self.env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "CLAUDE_CONFIG_DIR": str(self.claude_root)}
        for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_TOKEN"):
            self.env.pop(name, None)
        self.gw = Gateway.open(self.store_url, timers=False)
        self.gw.upstream.configure(claude_root=self.claude_root)
        self.gw.put_session(MANAGER)
        self.worker = ClaudeTranscript(self.claude_root)
        self.worker.assistant("ready")
        res = self.gw.continue_thread("claude", self.worker.session_id)
        assert res["linked"], res
        self.worker_key = res["sessionKey"]
        assert self.gw.watch(MANAGER, self.worker_key, agent_id=res["agentId"])
        self.manager_thread = str(uuid.uuid4())
        self.manager_transcript = str(
            self.claude_root / "projects" / "-home-dev-manager" / f"{self.manager_thread}.jsonl"
        )

    def hook(
        self, host: str, payload: dict[str, Any], *args: str, lose_answer: bool = False, store: str | None = None
    ) -> tuple[int, str, str]:
        cmd = [*SESSIONWATCH, "--store", store or self.store_url, "hook", host, "--log-file", "-", *args]
        if not lose_answer:
            res = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, env=self.env, timeout=60)
            return res.returncode, res.stdout.decode(), res.stderr.decode()
        # the host drops the answer: it stops reading before the hook prints
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env
        )
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.close()
        _, err = proc.communicate(json.dumps(payload).encode(), timeout=60)
        return proc.returncode, "", err.decode()

    def human_messages(self) -> list[dict[str, Any]]:
        page = self.gw.changes_since(self.worker_key, 0).to_json()
        return [e for e in page["events"] if e["kind"] == "human_direct_message"]

    def wait_for_messages(self, n: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        return wait_until(
            lambda: found if len(found := self.human_messages()) >= n else None,
            timeout=timeout,
            interval=0.1,
            what=f"{n} human_direct_message events",
        )

    def person_types(self, text: str, delay: float = 0.0) -> threading.Thread:
        """The host writes the prompt's row, possibly a moment after the hook started (it often does)."""

        def write() -> None:
            time.sleep(delay)  # the host's lag is the subject: the hook must wait for the row to appear
            self.worker.prompt(text)

        t = threading.Thread(target=write)
        t.start()
        return t


@pytest.fixture
def world(tmp_path: Path) -> Any:
    w = World(tmp_path)
    yield w
    w.gw.close()


def _context(stdout: str) -> str:
    answer = json.loads(stdout)
    assert set(answer) == {"hookSpecificOutput"}
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    return out["additionalContext"]


def test_worker_prompt_is_recorded_and_manager_gets_exactly_one_notice_at_least_once(world: World) -> None:
    # 1. A person types into the watched worker; its UserPromptSubmit hook records it (the row lands late).
    writer = world.person_types("stop, use the 2024 brief instead", delay=0.4)
    code, out, err = world.hook(
        "claude-code",
        claude_input(
            "UserPromptSubmit",
            world.worker.session_id,
            str(world.worker.path),
            prompt="stop, use the 2024 brief instead",
        ),
    )
    writer.join()
    assert code == 0 and out == "", err  # the worker itself has nothing pending
    events = world.wait_for_messages(1)
    assert len(events) == 1 and events[0]["actorType"] == "human"
    # the regular tick sees the same row again and records nothing more ("changed": it ran while the
    # detached nudge, having recorded, moved the link's marker; it then leaves the link alone)
    tick = world.gw.upstream_tick()
    entry = next(x for x in tick["links"] if x["sessionKey"] == world.worker_key)
    assert entry["status"] in ("unchanged", "deduplicated", "changed"), entry
    assert len(world.human_messages()) == 1

    manager = claude_input(
        "UserPromptSubmit", world.manager_thread, world.manager_transcript, prompt="what is the status?"
    )
    # 2. The manager's next prompt gets exactly one notice, as the System: line itself.
    code, out, err = world.hook("claude-code", manager, "--session", MANAGER)
    assert code == 0, err
    lines = _context(out).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("System: [") and world.worker_key in lines[0]
    assert lines[0] == world.gw.peek_system_events(MANAGER)[0]["line"]  # still queued: acknowledged next run

    # 3. The same hook then returns nothing (and the notice is consumed now, by its detached part).
    code, out, err = world.hook("claude-code", manager, "--session", MANAGER)
    assert (code, out) == (0, ""), err
    wait_until(lambda: world.gw.peek_system_events(MANAGER) == [], timeout=60, what="the notice acknowledged")

    # 4. A new notice whose answer is lost on the way comes again, once.
    world.person_types("and skip the appendix").join()
    world.gw.upstream_tick()
    assert len(world.human_messages()) == 2
    pending = world.gw.peek_system_events(MANAGER)
    assert len(pending) == 1
    code, out, err = world.hook("claude-code", manager, "--session", MANAGER, lose_answer=True)
    assert code == 0, err
    assert "given again next run" in err
    code, out, err = world.hook("claude-code", manager, "--session", MANAGER)
    assert code == 0, err
    assert _context(out).splitlines() == [pending[0]["line"]]
    code, out, err = world.hook("claude-code", manager, "--session", MANAGER)
    assert (code, out) == (0, ""), err
    wait_until(lambda: world.gw.peek_system_events(MANAGER) == [], timeout=60, what="the notice acknowledged")


def test_codex_hook_answers_in_its_format_and_session_comes_from_the_environment(world: World) -> None:
    world.gw.enqueue_system_event(MANAGER, "Heads up: the release branch was cut.")
    world.env["SESSIONWATCH_SESSION"] = MANAGER
    payload = codex_input("UserPromptSubmit", str(uuid.uuid4()), None, prompt="carry on", turn_id=str(uuid.uuid4()))
    code, out, err = world.hook("codex", payload)
    assert code == 0, err
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert answer["additionalContext"].endswith("Heads up: the release branch was cut.")
    start = codex_input("SessionStart", payload["session_id"], None, source="startup")
    code, out, err = world.hook("codex", start)
    assert (code, out) == (0, ""), err  # answered before: acknowledged now, nothing else pending


def test_session_start_and_post_tool_use_deliver_too(world: World) -> None:
    world.gw.enqueue_system_event(MANAGER, "first")
    code, out, _ = world.hook(
        "claude-code",
        claude_input(
            "SessionStart", world.manager_thread, world.manager_transcript, source="startup", model="claude-sonnet-4-6"
        ),
        "--session",
        MANAGER,
    )
    assert json.loads(out)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    world.gw.enqueue_system_event(MANAGER, "second")
    code, out, _ = world.hook(
        "claude-code",
        claude_input(
            "PostToolUse",
            world.manager_thread,
            world.manager_transcript,
            tool_name="Bash",
            tool_input={"command": "ls"},
            tool_response={"stdout": "", "stderr": ""},
            tool_use_id="toolu_01",
        ),
        "--session",
        MANAGER,
    )
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PostToolUse"
    assert answer["additionalContext"].splitlines()[-1].endswith("second")
    assert "first" not in answer["additionalContext"]  # delivered by SessionStart, acknowledged now


def test_the_adoption_link_names_the_session_and_an_unknown_one_is_a_no_op(world: World) -> None:
    world.gw.enqueue_system_event(world.worker_key, "for the worker")
    payload = claude_input(
        "PostToolUse",
        world.worker.session_id,
        str(world.worker.path),
        tool_name="Read",
        tool_input={},
        tool_response={},
        tool_use_id="toolu_02",
    )
    code, out, err = world.hook("claude-code", payload)
    assert code == 0, err
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"].endswith("for the worker")
    stranger = claude_input("UserPromptSubmit", str(uuid.uuid4()), "/nowhere/x.jsonl", prompt="hello")
    code, out, err = world.hook("claude-code", stranger, "--no-nudge")
    assert (code, out) == (0, ""), err


@pytest.mark.parametrize("how", ["store", "gateway"])
def test_a_store_or_gateway_that_is_down_answers_nothing_at_once(world: World, tmp_path: Path, how: str) -> None:
    payload = claude_input("UserPromptSubmit", world.manager_thread, world.manager_transcript, prompt="hi")
    begun = time.monotonic()
    if how == "store":
        broken = tmp_path / "broken.db"
        broken.write_text("this is not a SQLite database, it cannot be opened" * 100)
        code, out, err = world.hook("claude-code", payload, "--session", MANAGER, store=f"sqlite:///{broken}")
    else:
        cmd = [
            *SESSIONWATCH,
            "--gateway",
            "http://127.0.0.1:9",
            "hook",
            "claude-code",
            "--session",
            MANAGER,
            "--log-file",
            "-",
        ]
        res = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, env=world.env, timeout=60)
        code, out, err = res.returncode, res.stdout.decode(), res.stderr.decode()
    took = time.monotonic() - begun
    assert (code, out) == (0, ""), err
    assert "no answer" in err, err
    assert took < 5.0


def test_bad_input_is_a_silent_no_op(world: World) -> None:
    for raw in (b"", b"not json", b"[1, 2]", json.dumps({"hook_event_name": "Stop"}).encode()):
        res = subprocess.run(
            [*SESSIONWATCH, "--store", world.store_url, "hook", "claude-code", "--session", MANAGER, "--log-file", "-"],
            input=raw,
            capture_output=True,
            env=world.env,
            timeout=60,
        )
        assert (res.returncode, res.stdout) == (0, b""), res.stderr


def test_a_codex_worker_prompt_is_recorded_once_and_a_scheduled_one_never(world: World) -> None:
    from tests.upstream.writers import CodexRollout

    codex_root = world.tmp / "codex"
    world.gw.upstream.configure(codex_root=codex_root)
    rollout = CodexRollout(codex_root)
    rollout.agent("ready")
    res = world.gw.continue_thread("codex", rollout.thread_id)
    key = res["sessionKey"]
    world.gw.watch(MANAGER, key, agent_id=res["agentId"])
    world.env["CODEX_HOME"] = str(codex_root)

    def hook(text: str) -> None:
        payload = codex_input(
            "UserPromptSubmit", rollout.thread_id, str(rollout.path), prompt=text, turn_id=str(uuid.uuid4())
        )
        code, out, err = world.hook("codex", payload, "--foreground-nudge", "--nudge-wait", "300")
        assert (code, out) == (0, ""), err

    def messages() -> list[dict[str, Any]]:
        page = world.gw.changes_since(key, 0).to_json()
        return [e for e in page["events"] if e["kind"] == "human_direct_message"]

    rollout.user_legacy("run the retry tests and tell me which one flakes")
    hook("run the retry tests and tell me which one flakes")
    assert len(messages()) == 1  # recorded by the hook itself, before any tick
    entry = next(x for x in world.gw.upstream_tick()["links"] if x["sessionKey"] == key)
    assert entry["status"] in ("unchanged", "deduplicated"), entry
    assert len(messages()) == 1
    # a harness-written prompt also fires UserPromptSubmit: the transcript rules say it is not a person
    rollout.environment()
    hook("<environment_context>")
    assert len(messages()) == 1


def test_against_a_running_gateway(world: World, tmp_path: Path) -> None:
    from tests.support.ports import listening_socket, port_of, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    sock = listening_socket()  # served with --fd: no port race
    port, url = port_of(sock), url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", world.store_url, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=world.env,
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=30)
        world.gw.enqueue_system_event(MANAGER, "via the gateway")
        payload = claude_input("UserPromptSubmit", world.manager_thread, world.manager_transcript, prompt="hi")
        cmd = [
            *SESSIONWATCH,
            "--gateway",
            f"http://127.0.0.1:{port}",
            "hook",
            "claude-code",
            "--session",
            MANAGER,
            "--no-nudge",
            "--log-file",
            "-",
        ]

        def run() -> tuple[int, str, str]:
            res = subprocess.run(
                cmd, input=json.dumps(payload).encode(), capture_output=True, env=world.env, timeout=60
            )
            return res.returncode, res.stdout.decode(), res.stderr.decode()

        code, out, err = run()
        assert code == 0, err
        assert _context(out).endswith("via the gateway")
        code, out, err = run()
        assert (code, out) == (0, ""), err
        assert world.gw.peek_system_events(MANAGER) == []
        # a worker whose hook names its own adopted session: the prompt is recorded through the gateway
        world.worker.prompt("use the staging database")
        worker = claude_input(
            "UserPromptSubmit", world.worker.session_id, str(world.worker.path), prompt="use the staging database"
        )
        res = subprocess.run(
            [
                *SESSIONWATCH,
                "--gateway",
                f"http://127.0.0.1:{port}",
                "hook",
                "claude-code",
                "--session",
                world.worker_key,
                "--log-file",
                "-",
            ],
            input=json.dumps(worker).encode(),
            capture_output=True,
            env=world.env,
            timeout=60,
        )
        assert (res.returncode, res.stdout) == (0, b""), res.stderr
        assert len(world.wait_for_messages(1)) == 1
    finally:
        stop(server)


def test_against_a_running_gateway_a_prompt_row_written_after_the_hook_is_still_recorded(
    world: World, tmp_path: Path
) -> None:
    """Claude Code writes the prompt's row only after its UserPromptSubmit hooks return. The gateway's
    nudge looks again for it (it used to scan once, too early, and the prompt waited for a monitor tick;
    this gateway runs none, so only the nudge can record it)."""
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", world.store_url, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=world.env,
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=30)
        writer = world.person_types("ship it on Friday instead", delay=0.5)
        worker = claude_input(
            "UserPromptSubmit", world.worker.session_id, str(world.worker.path), prompt="ship it on Friday instead"
        )
        started = time.monotonic()
        res = subprocess.run(
            [*SESSIONWATCH, "--gateway", url, "hook", "claude-code", "--session", world.worker_key, "--log-file", "-"],
            input=json.dumps(worker).encode(),
            capture_output=True,
            env=world.env,
            timeout=60,
        )
        assert (res.returncode, res.stdout) == (0, b""), res.stderr
        writer.join()
        events = world.wait_for_messages(1, timeout=30)
        print(f"recorded {time.monotonic() - started:.2f} s after the hook started")
        assert [e["actorType"] for e in events] == ["human"]
    finally:
        stop(server)


def test_without_a_key_a_host_session_is_its_own_and_a_user_install_names_it_after_its_folder(world: World) -> None:
    """No --session, no link: the host session's own key, ``agent:<folder>:claude:<id>`` (the folder it
    runs in, as a ``--user`` install leaves it), created and adopted on its first event; a second
    session in the same folder is a second key; a subagent's start makes a child the session watches."""
    env = {k: v for k, v in world.env.items() if k != "CLAUDE_PROJECT_DIR"}
    world.env = env
    first, second = ClaudeTranscript(world.claude_root), ClaudeTranscript(world.claude_root)
    for t in (first, second):
        t.assistant("hello")
        payload = claude_input("SessionStart", t.session_id, str(t.path), source="startup", cwd="/home/dev/My Repo")
        code, out, err = world.hook("claude-code", payload)
        assert (code, out) == (0, ""), err
    keys = {f"agent:my-repo:claude:{t.session_id}" for t in (first, second)}
    wait_until(lambda: all(world.gw.link(k) for k in keys), timeout=30, what="both sessions created and adopted")
    own = f"agent:my-repo:claude:{first.session_id}"
    start = claude_input("SubagentStart", first.session_id, str(first.path), agent_id="a7", agent_type="Explore")
    assert world.hook("claude-code", {**start, "cwd": "/home/dev/My Repo"})[:2] == (0, "")
    child = "agent:my-repo:subagent:a7"
    assert world.gw.session(child).spawned_by == own
    assert any(c["target"] == child for c in world.gw.cursors(watcher=own))


def test_through_a_gateway_a_command_hook_loads_no_http_client_and_gives_a_notice_once(world: World) -> None:
    """Codex has no HTTP hooks, so through a gateway each event is a process: it asks the gateway's hook
    route with a plain socket (no HTTP client, no engine loaded), prints the answer, and the gateway
    keeps the answer state: a notice once, acknowledged at the next run."""
    import sys

    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", world.store_url, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=world.env,
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=30)
        world.gw.enqueue_system_event(MANAGER, "via the gateway, quickly")
        payload = codex_input("PostToolUse", world.manager_thread, None, tool_name="exec_command")
        cmd = [sys.executable, "-X", "importtime", "-m", "sessionwatch", "--gateway", url, "hook", "codex"]
        cmd += ["--session", MANAGER]

        def run() -> tuple[str, str]:
            res = subprocess.run(
                cmd, input=json.dumps(payload).encode(), capture_output=True, env=world.env, timeout=60
            )
            assert res.returncode == 0
            return res.stdout.decode(), res.stderr.decode()

        out, imports = run()
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert context.endswith("via the gateway, quickly")
        loaded = {line.split("|")[-1].strip() for line in imports.splitlines() if line.startswith("import time:")}
        assert not loaded & {"httpx", "http.client", "sessionwatch.client", "sessionwatch.engine.gateway"}, loaded
        # nor what the quick path leaves out: each a noticeable part of a run that should cost little more
        # than Python's start (typing, threading, pathlib; urllib.parse and socket.py for one POST; the full
        # run's module and logging)
        light = {"typing", "threading", "pathlib", "urllib.parse", "socket", "logging", "sessionwatch.hooks.run"}
        assert not loaded & light, loaded & light
        assert run()[0] == ""  # given once; this run acknowledged it
        assert world.gw.peek_system_events(MANAGER) == []
    finally:
        stop(server)
