"""Who typed a prompt into a watched Codex thread: only a person's prompt is a ``human_direct_message``.

Every rollout here is written by the real Codex CLI (pinned) against the fake model, and the monitor
reads it through its real path: adopt the thread, watch it, tick, look at what was recorded and at the
watcher's notices. Programs: ``codex exec`` (and ``exec resume``), ``codex queue``, an app-server
client, and a subagent spawned by the model's ``spawn_agent`` call. A person's turn (``turn_trigger``
``user``) comes only from the interactive TUI; test_person_prompt.py drives the real TUI in a pty. The
tests here that need a person's turn at a chosen place in a rollout (split across scans, across a
restart, past the scan window) take a real ``codex exec`` rollout and change nothing but that turn's
trigger value, ``"exec"`` to ``"user"``, which is all the TUI writes differently.
The last test reads the same rollouts on another machine, through ``sessionwatch node``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessionwatch import Settings
from sessionwatch.clock import ManualClock
from sessionwatch.node_server import create_node_app
from tests.hosts.codex_rpc import AppServer
from tests.support.fake_model import FakeModel, Reply
from tests.support.hosts import CodexHome, Run, codex
from tests.support.ports import ServerThread
from tests.upstream.conftest import Harness

pytestmark = pytest.mark.hosts


def ok(run: Run) -> Run:
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def rollouts(home: Path) -> list[Path]:
    return sorted((home / "sessions").rglob("rollout-*.jsonl"))


def thread_of(path: Path) -> str:
    return path.name[-len("00000000-0000-0000-0000-000000000000.jsonl") : -len(".jsonl")]


def rows(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def triggers(path: Path) -> list[object]:
    out = []
    for line in rows(path):
        row = json.loads(line)
        if row["type"] == "event_msg" and row["payload"]["type"] == "task_started":
            out.append(row["payload"]["turn_attribution"]["turn_trigger"])
    return out


def turn_starts(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if b'"type":"task_started"' in line]


def as_person(line: bytes) -> bytes:
    """The one edit: this turn was started by a person in the TUI instead of by ``codex exec``."""
    assert line.count(b'"turn_trigger":"exec"') == 1, line
    return line.replace(b'"turn_trigger":"exec"', b'"turn_trigger":"user"')


def monitor(root: Path, codex_home: Path, **kw: object) -> Harness:
    """A gateway whose Codex catalog is ``codex_home`` (a manual clock: it scans when told to)."""
    claude = root / "claude"
    (claude / "projects").mkdir(parents=True, exist_ok=True)
    (codex_home / "sessions").mkdir(parents=True, exist_ok=True)
    return Harness(f"sqlite:///{root}/state.db", ManualClock(), claude, codex_home, **kw)  # type: ignore[arg-type]


class RoutedModel(FakeModel):
    """The fake model, answering some requests by what they hold (``route`` returns None: the script).

    A parent and its subagent ask the model concurrently, so a script in arrival order cannot say who
    gets which reply."""

    def __init__(self, route: Callable[[FakeModel, dict], Reply | None]) -> None:
        super().__init__("openai")
        self.respond = lambda body: route(self, body)


def spawn_and_wait(model: FakeModel, body: dict) -> Reply | None:
    """The parent spawns a subagent with a task and waits for it to finish; the subagent answers."""
    texts = model.texts(body)
    if not any("spawn a helper" in t for t in texts):
        return Reply.say("the subagent is done") if any("the subagent's task" in t for t in texts) else None
    results = model.tool_results(body)
    if not results:
        return Reply.call("multi_agent_v1__spawn_agent", {"message": "the subagent's task"})
    if len(results) == 1:  # spawn_agent answered {"agent_id", "nickname"}
        agent = json.loads(results[0])["agent_id"]
        return Reply.call("multi_agent_v1__wait_agent", {"targets": [agent], "timeout_ms": 120_000})
    return Reply.say("the helper finished")


@dataclass
class Captured:
    """Rollouts the real Codex wrote: one thread of two ``codex exec`` turns, and a subagent's thread."""

    home: Path
    worker: Path
    subagent: Path


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    root = tmp_path_factory.mktemp("codex-capture")
    with RoutedModel(spawn_and_wait) as model:
        h = CodexHome(root, codex(), model.url)
        model.script(Reply.say("first answer"))
        ok(h.prompt("set up the worker"))
        (worker,) = rollouts(h.codex_home)
        model.script(Reply.say("second answer"))
        ok(h.run("exec", "--skip-git-repo-check", "resume", thread_of(worker), "the second turn's prompt"))
        ok(h.prompt("spawn a helper"))
        assert model.seen("the subagent's task"), "the subagent never ran"
    (sub,) = [p for p in rollouts(h.codex_home) if b'"thread_source":"subagent"' in p.read_bytes()]
    assert b'"type":"task_complete"' in sub.read_bytes(), "the subagent's turn did not finish"
    assert triggers(worker) == ["exec", "exec"]
    yield Captured(h.codex_home, worker, sub)


def replay(
    h: Harness, captured: Captured, source: Path, lines: list[bytes], split: int, until: int | None = None
) -> tuple[str, Path]:
    """Write ``lines[:split]`` where Codex wrote the rollout, adopt and watch the thread, then append
    ``lines[split:until]`` one row per write, as Codex appends."""
    target = h.codex_root / source.relative_to(captured.home)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(lines[:split]))
    key = h.adopt("codex", thread_of(source))
    append(target, lines[split:until])
    return key, target


def append(target: Path, lines: list[bytes]) -> None:
    with open(target, "ab") as fh:
        for line in lines:
            fh.write(line)
            fh.flush()


def scan_all(h: Harness, key: str) -> None:
    for _ in range(2000):
        if h.entry(h.tick(), key)["status"] == "unchanged":
            return
    raise AssertionError("the scan never caught up")


# -- the programs, live ---------------------------------------------------------------------------------


def test_a_codex_exec_prompt_into_a_watched_worker_is_not_a_persons(tmp_path: Path) -> None:
    with FakeModel("openai") as model:
        h = CodexHome(tmp_path / "host", codex(), model.url)
        ok(h.prompt("set up the worker"))
        (path,) = rollouts(h.codex_home)
        mon = monitor(tmp_path / "gw", h.codex_home)
        try:
            key = mon.adopt("codex", thread_of(path))
            ok(h.run("exec", "--skip-git-repo-check", "resume", thread_of(path), "a prompt from a script"))
            assert b"a prompt from a script" in path.read_bytes() and triggers(path) == ["exec", "exec"]
            entry = mon.entry(mon.tick(), key)
            assert entry["status"] == "advanced" and entry["humanTurns"] == 0, entry
            assert mon.events(key, "human_direct_message") == [] and mon.notices() == []
        finally:
            mon.close()


def test_a_codex_queue_message_is_not_a_persons(tmp_path: Path) -> None:
    with FakeModel("openai") as model:
        h = CodexHome(tmp_path / "host", codex(), model.url)
        ok(h.prompt("set up the worker"))
        (path,) = rollouts(h.codex_home)
        tid = thread_of(path)
        mon = monitor(tmp_path / "gw", h.codex_home)
        try:
            key = mon.adopt("codex", tid)
            ok(h.run("queue", "--thread", tid, "--message", "a queued message"))
            with AppServer(h) as server:  # resuming the thread runs what was queued
                server.call("thread/resume", {"threadId": tid})
                server.wait_for("turn/completed")
            assert model.seen("a queued message") and triggers(path) == ["exec", "queue"]
            entry = mon.entry(mon.tick(), key)
            assert entry["status"] == "advanced" and entry["humanTurns"] == 0, entry
            assert mon.events(key, "human_direct_message") == [] and mon.notices() == []
        finally:
            mon.close()


def test_an_app_server_clients_prompt_is_not_a_persons(tmp_path: Path) -> None:
    with FakeModel("openai") as model:
        h = CodexHome(tmp_path / "host", codex(), model.url)
        with AppServer(h) as server:
            tid = server.call("thread/start", {"cwd": str(h.project)})["thread"]["id"]
            server.turn(tid, "the client's first prompt")
            (path,) = rollouts(h.codex_home)
            mon = monitor(tmp_path / "gw", h.codex_home)
            try:
                key = mon.adopt("codex", tid)
                server.turn(tid, "the client's second prompt")
                assert model.seen("the client's second prompt") and triggers(path) == [None, None]
                entry = mon.entry(mon.tick(), key)
                assert entry["status"] == "advanced" and entry["humanTurns"] == 0, entry
                assert mon.events(key, "human_direct_message") == [] and mon.notices() == []
            finally:
                mon.close()


# -- replays of what the real binary wrote ---------------------------------------------------------------


@pytest.mark.parametrize("adopted", ["before its first turn", "while still empty"])
@pytest.mark.parametrize("trigger", ["exec", "user"])
def test_a_subagents_task_prompt_is_never_a_persons(
    tmp_path: Path, captured: Captured, trigger: str, adopted: str
) -> None:
    """The subagent thread the real ``spawn_agent`` made, adopted before its first turn (adoption reads
    its ``session_meta``) or before Codex wrote anything (the scan reads it). With ``user``, only that
    turn's trigger value is changed: a subagent's thread still has no person in it."""
    lines = rows(captured.subagent)
    (start, *_) = turn_starts(lines)
    if trigger == "user":
        lines[start] = as_person(lines[start])
    h = monitor(tmp_path, tmp_path / "codex")
    try:
        key, _ = replay(h, captured, captured.subagent, lines, start if adopted == "before its first turn" else 0)
        scan_all(h, key)
        assert b"the subagent's task" in b"".join(lines[start:])
        assert h.human_turns(key) == 0 and h.notices() == []
    finally:
        h.close()


@pytest.mark.parametrize("adopted", ["between turns", "inside the turn"])
def test_a_persons_prompt_is_recorded_and_a_programs_is_not(tmp_path: Path, captured: Captured, adopted: str) -> None:
    """The two-turn ``codex exec`` thread adopted after its first turn (or just after the second turn's
    ``task_started``: adoption reads the turn's trigger from the file), once as the binary wrote it and
    once with the second turn's trigger changed to ``user``."""
    original = rows(captured.worker)
    second = turn_starts(original)[1]
    split = second if adopted == "between turns" else second + 1
    person = list(original)
    person[second] = as_person(person[second])
    recorded = []
    for name, lines in (("program", original), ("person", person)):
        h = monitor(tmp_path / name, tmp_path / name / "codex")
        try:
            key, _ = replay(h, captured, captured.worker, lines, split)
            scan_all(h, key)
            recorded.append((h.human_turns(key), len(h.notices())))
            if name == "person":
                (ev,) = h.events(key, "human_direct_message")
                assert ev["actorType"] == "human" and ev["summary"] == "human message via codex", ev
        finally:
            h.close()
    assert recorded == [(0, 0), (1, 1)]


def test_the_turns_trigger_survives_between_ticks_and_a_gateway_restart(tmp_path: Path, captured: Captured) -> None:
    """The second turn's ``task_started`` is scanned in one tick, the gateway restarts, and its prompt is
    scanned after: the trigger read before the restart decides."""
    original = rows(captured.worker)
    second = turn_starts(original)[1]
    person = list(original)
    person[second] = as_person(person[second])
    recorded = []
    for name, lines in (("program", original), ("person", person)):
        h = monitor(tmp_path / name, tmp_path / name / "codex")
        try:
            key, target = replay(h, captured, captured.worker, lines, second, second + 1)  # the turn's start
            entry = h.entry(h.tick(), key)
            assert entry["status"] == "advanced" and entry["humanTurns"] == 0, entry
            h.restart()
            append(target, lines[second + 1 :])
            scan_all(h, key)
            recorded.append(h.human_turns(key))
        finally:
            h.close()
    assert recorded == [0, 1]


def test_a_marker_saved_before_thread_contexts_reads_the_turn_from_the_file(tmp_path: Path, captured: Captured) -> None:
    """A link whose marker an earlier version saved (offset and file identity, no ``thread``), inside
    the second turn: its trigger is read from the file before the new rows are judged."""
    original = rows(captured.worker)
    second = turn_starts(original)[1]
    person = list(original)
    person[second] = as_person(person[second])
    recorded = []
    for name, lines in (("program", original), ("person", person)):
        h = monitor(tmp_path / name, tmp_path / name / "codex")
        try:
            target = h.codex_root / captured.worker.relative_to(captured.home)
            target.parent.mkdir(parents=True)
            target.write_bytes(b"".join(lines[: second + 1]))
            key = h.adopt("codex", thread_of(captured.worker))
            link = h.gw.store.get_link(key, "main")
            old = {k: v for k, v in link.marker.items() if k != "thread"}
            assert h.gw.store.advance_link(key, "main", link.updated_at, old, h.clock())
            append(target, lines[second + 1 :])
            scan_all(h, key)
            recorded.append(h.human_turns(key))
            assert "thread" in h.gw.store.get_link(key, "main").marker  # learned, and kept from now on
        finally:
            h.close()
    assert recorded == [0, 1]


def test_rows_longer_than_the_scan_window_follow_the_same_rule(tmp_path: Path, captured: Captured) -> None:
    """With a 256-byte window every row is read in pieces (the bounded-memory path, its state kept in the
    marker between ticks), ``task_started`` and ``session_meta`` included."""
    original = rows(captured.worker)
    assert all(len(line) > 256 for line in original)
    second = turn_starts(original)[1]
    person = list(original)
    person[second] = as_person(person[second])
    recorded = []
    for name, lines in (("program", original), ("person", person)):
        h = monitor(
            tmp_path / name, tmp_path / name / "codex", settings=Settings(scan_window_bytes=256), scan_budget_s=0
        )
        try:
            # adopted before the session_meta row: the whole thread is read through the streaming path
            key, _ = replay(h, captured, captured.worker, lines, 0)
            scan_all(h, key)
            recorded.append(h.human_turns(key))
        finally:
            h.close()
    assert recorded == [0, 1]


@pytest.mark.parametrize("page_size", [3, 50])
def test_through_a_paired_node_the_same_rule_holds(tmp_path: Path, captured: Captured, page_size: int) -> None:
    """The rollout on another machine, served by ``sessionwatch node``: with 3 items a page, the prompt's
    page ends before its turn's start, which the node then reads further back in the file."""
    original = rows(captured.worker)
    second = turn_starts(original)[1]
    person = list(original)
    person[second] = as_person(person[second])
    recorded = []
    for name, lines in (("program", original), ("person", person)):
        node_root = tmp_path / name / "node-codex"
        target = node_root / captured.worker.relative_to(captured.home)
        target.parent.mkdir(parents=True)
        target.write_bytes(b"".join(lines[:second]))
        app = create_node_app("node-secret-token", claude_root=str(tmp_path / name / "nc"), codex_root=str(node_root))
        h = monitor(tmp_path / name, tmp_path / name / "codex", settings=Settings(node_page_size=page_size))
        try:
            with ServerThread(app) as node:
                h.gw.pair_node("laptop", node.url, "node-secret-token")
                key = h.adopt("codex", thread_of(captured.worker), host_id="node:laptop")
                append(target, lines[second:])
                entry = h.entry(h.tick(), key)
                assert entry["status"] in ("advanced", "recorded"), entry
                recorded.append(h.human_turns(key))
        finally:
            h.close()
    assert recorded == [0, 1]
