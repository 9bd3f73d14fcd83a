"""Adding a host is adding a room: every room in the registry is reached by ``install``, ``uninstall``,
``doctor``, the hook command and the monitor, and nothing outside a room branches on a host's name."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.hosts.registry import ROOMS
from sessionwatch.hosts.transcripts import TranscriptFiles
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sessionwatch"
KEY = "agent:main:main"


def made_up(*args: str, cwd: Path, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``sessionwatch ARGS`` with a made-up host registered as one more room (tests/hosts/made_up_room.py)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.hosts.made_up_room", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_room_added_to_the_registry_is_installed_checked_hooked_and_monitored(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    env = {**os.environ, "SESSIONWATCH_STATE_DIR": str(tmp_path / "state")}
    project = tmp_path / "project"
    project.mkdir()

    before = made_up("--json", "doctor", "made-up", "--dir", str(project), cwd=ROOT, env=env)
    assert before.returncode == 1, before.stderr  # nothing installed yet
    assert json.loads(before.stdout)["hosts"][0]["scopes"][0]["installed"] is False

    done = made_up("--json", "--store", store, "install", "made-up", "--dir", str(project), cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert [c["action"] for c in json.loads(done.stdout)["changes"]] == ["created"]
    doctor = made_up("--json", "doctor", "made-up", "--dir", str(project), cwd=ROOT, env=env)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0, doctor.stdout
    assert report["hosts"][0]["version"] == "made-up 1.0"
    assert report["hosts"][0]["scopes"][0]["checks"][0]["detail"].endswith("is there")

    with Gateway.open(store, timers=False) as gw:  # the hook answers with the session's pending notice
        gw.enqueue_system_event(KEY, "a made-up notice")
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "t1", "prompt": "hi"})
    hook = made_up("--store", store, "hook", "made-up", "--session", KEY, cwd=project, env=env, stdin=payload)
    assert hook.returncode == 0, hook.stderr
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.endswith("a made-up notice")

    threads = made_up("--json", "--store", store, "threads", "madeup", cwd=ROOT, env=env)
    assert threads.returncode == 0, threads.stderr
    assert [t["threadId"] for t in json.loads(threads.stdout)["threads"]] == ["t1"]
    adopt = made_up("--json", "--store", store, "adopt", "madeup", "t1", "--session", "agent:w:w", cwd=ROOT, env=env)
    assert adopt.returncode == 0, adopt.stderr + adopt.stdout
    with Gateway.open(store, timers=False) as gw:  # the monitor reads it through the room's reader
        gw.watch(KEY, "agent:w:w")
    tick = made_up("--json", "--store", store, "tick", cwd=ROOT, env=env)
    assert tick.returncode == 0, tick.stderr
    links = json.loads(tick.stdout)["links"]
    assert [(x["sessionKey"], x["status"]) for x in links] == [("agent:w:w", "recorded")], links

    gone = made_up("--json", "uninstall", "made-up", "--dir", str(project), cwd=ROOT, env=env)
    assert [c["action"] for c in json.loads(gone.stdout)["changes"]] == ["removed"]
    assert not any(project.iterdir())


def test_a_prompt_a_room_tells_of_is_recorded_as_come_in_through_that_room(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    env = {**os.environ, "SESSIONWATCH_STATE_DIR": str(tmp_path / "state")}
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(KEY)
        gw.watch("agent:boss:main", KEY)  # watched: a person's prompt there is recorded
    typed = {"hook_event_name": "UserPromptSubmit", "session_id": "t1", "prompt": "ship it on Friday"}
    typed |= {"prompt_source": "interactive", "has_ui": True}  # a person typed it
    hook = made_up(
        "--store", store, "hook", "made-up", "--session", KEY, cwd=tmp_path, env=env, stdin=json.dumps(typed)
    )
    assert hook.returncode == 0, hook.stderr

    def told() -> list[dict[str, Any]]:  # the hook may write after it answered (a detached run)
        with Gateway.open(store, timers=False) as gw:
            return [e for e in gw.changes_since(KEY, 0).to_json()["events"] if e["kind"] == "human_direct_message"]

    events = wait_until(told, timeout=60, what="the prompt recorded")
    assert [(e["actorType"], e["summary"]) for e in events] == [("human", "human message via madeup")], events


def test_an_mcp_server_a_host_starts_stands_for_the_session_the_host_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessionwatch.hosts.identity import mcp_session_key

    monkeypatch.setenv("CLAUDE_PROJECT_DIR", "/somewhere/shop")
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID", raising=False)
    assert mcp_session_key(None) is None
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "5e55-10n")
    assert mcp_session_key(None) == "agent:shop:claude:5e55-10n"
    assert mcp_session_key("billing") == "agent:billing:claude:5e55-10n"


def test_every_registered_room_has_an_installer_and_a_reader() -> None:
    for name, room in ROOMS.items():
        installer = room.installer()
        for method in ("install", "uninstall", "diagnose", "version"):
            assert callable(getattr(installer, method)), (name, method)
        assert isinstance(installer.path_hint, str)
        reader = room.reader()
        # a node serves the transcripts of a room whose host writes them, and offers a flag for their place
        assert room.place is not None and room.place.served == isinstance(reader, TranscriptFiles), name
        if isinstance(reader, TranscriptFiles):
            assert reader.catalog_id == room.catalog
        else:
            for method in ("adopt", "list_threads", "read", "at"):  # readers.SessionReader
                assert callable(getattr(reader, method)), (name, method)
            assert reader.catalog_id == room.catalog


def _host_names_used(tree: ast.AST) -> list[tuple[int, str]]:
    """Every place a host's name (a room's command-line name, catalog or program) stands as a value the code
    acts on: compared, a dict key or value, an argument, an element, a subscript, an assignment or a return;
    and every name made of one (``claude_root=``, ``def f(codex_home)``, ``opts.pi_dir``). A docstring or a
    message that mentions a host is fine: the name must be the whole string."""
    names = {*ROOMS, *(r.catalog for r in ROOMS.values()), *(r.program for r in ROOMS.values())}
    prefixes = tuple(f"{n.replace('-', '_')}_" for n in names)

    def is_name(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names

    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        values: list[ast.AST | None] = []
        identifiers: list[str | None] = []
        if isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            values = [*node.keys, *node.values]
        elif isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
            identifiers = [k.arg for k in node.keywords]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            values = list(node.elts)
        elif isinstance(node, ast.Subscript):
            values = [node.slice]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.Return):
            values = [node.value]
        elif isinstance(node, ast.arg):
            identifiers = [node.arg]
        elif isinstance(node, ast.Name):
            identifiers = [node.id]
        elif isinstance(node, ast.Attribute):
            identifiers = [node.attr]
        found += [(node.lineno, v.value) for v in values if is_name(v)]  # type: ignore[union-attr]
        found += [(node.lineno, i) for i in identifiers if i is not None and i.startswith(prefixes)]
    return sorted(set(found))


def test_the_host_name_finder_sees_keys_arguments_and_names() -> None:
    code = """
if host == "codex": pass
places = {"claude": root}
inbound(key, text, channel="pi")
threads("claude")
configure(claude_root=root)
def serve(codex_root=None): pass
x = opts.pi_root
catalog = "opencode"
print("serving the claude transcripts")
"""
    assert [line for line, _ in _host_names_used(ast.parse(code))] == [2, 3, 4, 5, 6, 7, 8, 9]


def test_nothing_outside_a_room_branches_on_a_host_name() -> None:
    rooms = {PACKAGE / "hosts" / name for name in ("claude_code", "codex", "opencode", "pi")}
    # the store conformance suite: host names there are example data in events, never a rule
    skipped = {*rooms, PACKAGE / "testing"}
    branches: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(folder in path.parents for folder in skipped):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        branches += [f"{path.relative_to(PACKAGE)}:{line}: {name!r}" for line, name in _host_names_used(tree)]
    assert branches == [], "a host's own rule belongs in its room (its card in hosts/<room>/):\n" + "\n".join(branches)
