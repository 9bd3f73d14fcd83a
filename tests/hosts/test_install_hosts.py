"""``sessionwatch install`` makes sessionwatch usable in the real hosts at once: the hooks run (Codex: with
no bypass flag, trusted through ``codex app-server``), the MCP tools are in the model's first request, a
reconcile call is permitted and its delta reaches the model, and the token reaches Codex's MCP server;
``doctor`` tells a missing trust from a working install."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply
from tests.support.hosts import HostHome, host_home

pytestmark = pytest.mark.hosts

MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:researcher"
TOOLS = {f"mcp__sessionwatch__{n}" for n in ("session_status", "sessions_list", "sessions_send", "sessions_spawn")}
BIN = str(Path(SESSIONWATCH[0]).parent)


def prepare(h: HostHome) -> str:
    """The host finds this installation's ``sessionwatch`` (and Codex's ``codex``) on its PATH; the store
    and the install snapshots live in the scratch home. Returns the store URL."""
    state = h.root / "state"
    h.extra_env["PATH"] = os.pathsep.join([BIN, str(h.binary.parent), os.environ.get("PATH", "/usr/bin:/bin")])
    h.extra_env["XDG_STATE_HOME"] = str(state)
    return f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"


def person_writes_into_child(store: str) -> str:
    """The manager watches the child; a person writes into the child. The manager's notice line."""
    Path(store.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        gw.put_session(CHILD)
        assert gw.watch(MANAGER, CHILD)
        gw.inbound(CHILD, "use the 2024 brief", channel="webchat")
        (entry,) = gw.peek_system_events(MANAGER)
        return str(entry["line"])


def sw(h: HostHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESSIONWATCH, *args], capture_output=True, text=True, env=h.env(), timeout=180)


def install(h: HostHome, *args: str) -> dict[str, Any]:
    res = sw(h, *args, "--dir", str(h.project), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[tuple[FakeModel, HostHome]]:
    with FakeModel("anthropic") as model, host_home("claude-code", tmp_path, model.url) as h:
        yield model, h


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[tuple[FakeModel, HostHome]]:
    with FakeModel("openai") as model, host_home("codex", tmp_path, model.url) as h:
        yield model, h


def reconcile(model: FakeModel) -> None:
    model.script(
        Reply.call("mcp__sessionwatch__session_status", {"sessionKey": CHILD, "changesSince": 0}),
        Reply.say("reconciled"),
    )


def delta_results(model: FakeModel) -> list[str]:
    results = [r for req in model.requests for r in model.tool_results(req)]
    return [r for r in results if "human_direct_message" in r and "stateChanges" in r]


@pytest.mark.parametrize("scope", ["project", "local"])
def test_claude_code_loads_the_tools_up_front_and_permits_the_reconcile_call(
    scope: str, claude: tuple[FakeModel, HostHome]
) -> None:
    model, h = claude
    line = person_writes_into_child(prepare(h))
    install(h, "install", "claude-code", f"--{scope}", "--session", MANAGER)
    reconcile(model)
    run = h.prompt("what changed?")
    assert run.returncode == 0, run.stderr[-2000:]
    first = model.requests[0]
    assert set(model.tool_names(first)) >= TOOLS  # loaded, not deferred behind ToolSearch (names only)
    status = next(t for t in first["tools"] if t["name"] == "mcp__sessionwatch__session_status")
    assert "changesSince" in json.dumps(status["input_schema"])
    assert 0 in model.seen(line), h.hook_log()  # the hook's notice is in the first request
    results = [r for req in model.requests for r in model.tool_results(req)]
    assert not any("haven't granted" in r for r in results), results
    assert len(delta_results(model)) == 1, results  # the call was permitted and the delta reached the model
    # the host hands the model the structured result: the data once, no prose rendering of it beside
    assert '"text"' not in delta_results(model)[0]


def test_codex_runs_the_hooks_without_any_bypass_and_lists_the_tools_in_the_first_request(
    codex: tuple[FakeModel, HostHome],
) -> None:
    model, h = codex
    line = person_writes_into_child(prepare(h))
    out = install(h, "install", "codex", "--session", MANAGER)
    trusted = [c for c in out["changes"] if c["action"] == "trusted"]
    assert len(trusted) == 1 and "codex app-server" in trusted[0]["note"], out
    print("trust exchange:", trusted[0]["note"])
    reconcile(model)
    run = h.prompt("what changed?")  # codex exec, no --dangerously-bypass-hook-trust
    assert run.returncode == 0, run.stderr[-2000:]
    assert model.seen(line) and model.seen(line)[0] == 0, run.stderr[-2000:]  # a hook ran and its context arrived
    assert set(model.tool_names(model.requests[0])) >= TOOLS
    assert len(delta_results(model)) == 1
    assert '"text"' not in delta_results(model)[0]  # the structured result only, its data once


def test_codex_passes_the_token_to_the_mcp_server_of_a_gateway(codex: tuple[FakeModel, HostHome]) -> None:
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    model, h = codex
    store = prepare(h)
    line = person_writes_into_child(store)
    token = "tok-" + "7" * 28
    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", store, "--no-monitor", "--token", token],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=h.env(),
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=60)
        h.extra_env["SESSIONWATCH_TOKEN"] = token  # in the host's environment only, never in a file
        out = install(h, "--gateway", url, "install", "codex", "--session", MANAGER)
        assert out["warnings"] == [], out
        assert token not in (h.project / ".codex" / "config.toml").read_text()
        reconcile(model)
        run = h.prompt("what changed?")
        assert run.returncode == 0, run.stderr[-2000:]
        assert 0 in model.seen(line), h.hook_log()
        assert set(model.tool_names(model.requests[0])) >= TOOLS
        assert len(delta_results(model)) == 1  # the server got the token: the gateway answered the call
    finally:
        stop(server)


def test_doctor_reports_untrusted_codex_hooks_and_ok_once_trusted(codex: tuple[FakeModel, HostHome]) -> None:
    model, h = codex
    line = person_writes_into_child(prepare(h))
    out = install(h, "install", "codex", "--session", MANAGER, "--no-trust")
    (skipped,) = [c for c in out["changes"] if c["path"].endswith("home/.codex/config.toml")]
    assert skipped["action"] == "skipped" and "/hooks" in skipped["note"]
    # the step names every hook install wrote: each is trusted on its own in /hooks
    written = json.loads((h.project / ".codex" / "hooks.json").read_text())["hooks"]
    assert len(written) == 8, written
    listed = skipped["note"].split("trust the 8 sessionwatch hooks (", 1)[1].split(")", 1)[0]
    assert set(listed.split(", ")) == set(written), skipped["note"]
    res = sw(h, "doctor", "codex", "--dir", str(h.project), "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads(res.stdout)["hosts"][0]
    assert report["version"] and "0.171" in report["version"]
    (project,) = [s for s in report["scopes"] if s["scope"] == "project"]
    trusted = next(c for c in project["checks"] if c["check"] == "trusted")
    assert trusted["ok"] is False and "not trusted" in trusted["detail"], trusted
    assert trusted["fix"].startswith("sessionwatch install codex --project")
    run = h.prompt("hello")  # doctor is right: Codex skips the hooks without a word
    assert run.returncode == 0 and len(model.requests) == 1 and not model.seen(line), run.stderr[-2000:]

    install(h, "install", "codex", "--session", MANAGER)
    res = sw(h, "doctor", "codex", "--dir", str(h.project), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    (project,) = [s for s in json.loads(res.stdout)["hosts"][0]["scopes"] if s["scope"] == "project"]
    assert all(c["ok"] is not False for c in project["checks"]), project
    assert next(c for c in project["checks"] if c["check"] == "trusted")["ok"] is True
    run = h.prompt("hello again")
    assert run.returncode == 0 and model.seen(line) == [1], run.stderr[-2000:]


def test_codex_uninstall_gives_the_user_config_back_byte_for_byte(codex: tuple[FakeModel, HostHome]) -> None:
    model, h = codex
    prepare(h)
    config = h.home / ".codex" / "config.toml"
    before = config.read_bytes()
    install(h, "install", "codex", "--session", MANAGER)
    assert config.read_bytes() != before  # Codex wrote the trust there
    install(h, "uninstall", "codex")
    assert config.read_bytes() == before
    assert not (h.project / ".codex").exists()


def test_a_hung_gateway_costs_each_http_hook_of_claude_code_the_hook_budget(claude: tuple[FakeModel, HostHome]) -> None:
    """An HTTP hook cannot remember a gateway as down, so Claude Code waits for a hung gateway on every
    prompt and tool call: install writes the hook budget as the timeout (0.5 s here), not 10 s. Five hooks
    run (the prompt, three tool calls, the end of the turn): at 10 s each the run would take 50 s."""
    import time

    from tests.support.hung_gateway import HungGateway

    model, h = claude
    prepare(h)
    hung = HungGateway()
    h.extra_env["SESSIONWATCH_HOOK_BUDGET"] = "0.5"
    try:
        install(h, "--gateway", hung.url, "install", "claude-code", "--session", MANAGER)
        written = json.loads((h.project / ".claude" / "settings.json").read_text())["hooks"]
        http = [x for groups in written.values() for g in groups for x in g["hooks"] if x["type"] == "http"]
        assert http and {x["timeout"] for x in http} == {0.5}, written
        (h.project / "notes.txt").write_text("the brief is due on Friday\n")
        read = Reply.call("Read", {"file_path": str(h.project / "notes.txt")})
        model.script(read, read, read, Reply.say("done"))
        begun = time.monotonic()
        run = h.prompt("read the notes three times")
        took = time.monotonic() - begun
        assert run.returncode == 0, run.stderr[-2000:]
        assert len(model.requests) >= 4  # the tool loop ran: each hook gave up and the turn went on
        assert hung.accepted >= 5, hung.accepted  # each HTTP hook asked the hung gateway
        assert took < 40, took  # about 3 s of hooks; 50 s with the old timeout (a busy machine's margin)
    finally:
        hung.stop_answering_nothing().close()
