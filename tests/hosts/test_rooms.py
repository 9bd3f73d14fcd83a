"""Adding a host is adding a room: every room in the registry is reached by ``install``, ``uninstall``,
``doctor``, the hook command and the monitor, and nothing outside a room branches on a host's name."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from sessionwatch import Gateway
from sessionwatch.hosts.registry import ROOMS
from sessionwatch.hosts.transcripts import TranscriptFiles

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


def test_every_registered_room_has_an_installer_and_a_reader() -> None:
    for name, room in ROOMS.items():
        installer = room.installer()
        for method in ("install", "uninstall", "diagnose", "version"):
            assert callable(getattr(installer, method)), (name, method)
        assert isinstance(installer.path_hint, str)
        reader = room.reader()
        if isinstance(reader, TranscriptFiles):
            assert reader.catalog_id == room.catalog
        else:
            for method in ("adopt", "list_threads", "read", "at"):  # readers.SessionReader
                assert callable(getattr(reader, method)), (name, method)
            assert reader.catalog_id == room.catalog


def _host_names_compared(tree: ast.AST) -> list[tuple[int, str]]:
    names = {*ROOMS, *(r.catalog for r in ROOMS.values())}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            values = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            for v in values:
                if isinstance(v, ast.Constant) and v.value in names:
                    found.append((node.lineno, v.value))
    return found


def test_nothing_outside_a_room_branches_on_a_host_name() -> None:
    rooms = {PACKAGE / "hosts" / name for name in ("claude_code", "codex", "opencode", "pi")}
    branches: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(room in path.parents for room in rooms):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        branches += [f"{path.relative_to(PACKAGE)}:{line}: {name!r}" for line, name in _host_names_compared(tree)]
    assert branches == [], "a host's own rule belongs in its room:\n" + "\n".join(branches)
