"""``sessionwatch tool NAME``: one tool run as a session, its result the engine's own JSON (what Pi's extension
runs for each call of a tool the model makes).

As a person or a script: ``--session KEY`` and the arguments as JSON. As a host: ``--host pi`` with the host's
input on stdin, the caller the host session's own key, made as the hook makes it. A tool's error is the
command's, with its exit code; bad input changes nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from sessionwatch import Gateway
from tests.cli.conftest import clean_env
from tests.support.commands import SESSIONWATCH

MANAGER, OTHER = "agent:main:main", "agent:main:other"


def tool(store: str, *args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SESSIONWATCH, "--store", store, "--json", "tool", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=clean_env(),
    )


def out_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(run.stdout)
    return value


def test_a_tool_runs_as_the_session_and_prints_what_the_engine_returns(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(OTHER)
    run = tool(store, "session_status", json.dumps({"sessionKey": OTHER, "changesSince": 0}), "--session", MANAGER)
    assert run.returncode == 0, run.stderr
    with Gateway.open(store, timers=False) as gw:
        assert gw.get_session(MANAGER)["sessionKey"] == MANAGER  # the caller, made on its first call
        again = gw.call_tool("session_status", {"sessionKey": OTHER, "changesSince": 0}, caller=MANAGER)
    assert out_of(run) == again  # the same JSON as Python, HTTP and MCP give
    piped = tool(store, "sessions_list", "-", "--session", MANAGER, stdin='{"limit": 1}')
    assert piped.returncode == 0 and len(out_of(piped)["sessions"]) == 1, piped.stderr
    human = subprocess.run(
        [*SESSIONWATCH, "--store", store, "tool", "session_status", "--session", MANAGER],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert human.returncode == 0 and human.stdout.startswith(f"Session {MANAGER}"), human.stdout  # its text


def test_a_hosts_input_names_the_host_sessions_own_key(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    project = tmp_path / "Acme Web"
    project.mkdir()
    payload = {"session_id": "0b1c-77", "cwd": str(project), "arguments": {}}
    run = tool(store, "session_status", "--host", "pi", stdin=json.dumps(payload), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert out_of(run)["sessionKey"] == "agent:acme-web:pi:0b1c-77"  # as the hook names the session
    run = tool(store, "session_status", "--host", "pi", "--agent", "acme", stdin=json.dumps(payload))
    assert out_of(run)["sessionKey"] == "agent:acme:pi:0b1c-77"
    run = tool(store, "session_status", "--host", "pi", "--session", MANAGER, stdin=json.dumps(payload))
    assert out_of(run)["sessionKey"] == MANAGER  # a bound install's key wins

    import time

    from sessionwatch.store.records import Link

    now = int(time.time() * 1000)  # the thread adopted under another key: its hook stands for that key
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(OTHER)
        gw.store.upsert_link(Link(OTHER, "main", "pi", "gateway:local", "0b1c-77", "local", {}, {}, now, now), now)
    run = tool(store, "session_status", "--host", "pi", stdin=json.dumps(payload))
    assert out_of(run)["sessionKey"] == OTHER, run.stdout


def test_errors_are_the_commands_and_change_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    Gateway.open(store, timers=False).close()
    for args, stdin in (
        (("session_status", "{not json", "--session", MANAGER), ""),
        (("session_status", "[1]", "--session", MANAGER), ""),
        (("no_such_tool", "--session", MANAGER), ""),
        (("sessions_list",), ""),  # no session to run as
        (("sessions_list", "--host", "pi"), json.dumps({"cwd": "/", "arguments": {}})),  # the input names none
        (("sessions_list", "--host", "pi", "{}"), json.dumps({"session_id": "s1"})),  # arguments twice
        (("sessions_list", "--host", "pi"), json.dumps({"session_id": "s1", "arguments": [1]})),
        (("sessions_list", json.dumps({"bogus": 1}), "--session", MANAGER), ""),
    ):
        run = tool(store, *args, stdin=stdin)
        assert run.returncode == 2 and out_of(run)["error"]["code"] == "invalid_argument", (args, run.stdout)
    with Gateway.open(store, timers=False) as gw:
        assert gw.call_tool("sessions_list", {}, caller="agent:sessionwatch:cli")["sessions"] == []  # nothing made
    missing = tool(store, "session_status", json.dumps({"sessionKey": OTHER}), "--session", MANAGER)
    assert missing.returncode == 3 and out_of(missing)["error"]["code"] == "not_found", missing.stdout


def test_the_help_names_every_tool() -> None:
    from sessionwatch.engine.tools import TOOLS

    run = subprocess.run([*SESSIONWATCH, "tool", "--help"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert run.returncode == 0 and all(name in run.stdout for name in TOOLS), run.stdout
