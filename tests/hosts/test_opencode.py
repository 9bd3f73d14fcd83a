"""OpenCode with the real binary (npm ``opencode-ai``, pinned) against the fake chat-completions server.

With the plugin ``sessionwatch install opencode`` writes: a pending notice reaches the model's next call
exactly once and is never stored in OpenCode's database; each OpenCode session becomes
``agent:project:opencode:<session id>`` on its start, adopted, with its lifecycle reported (idle, working,
idle); a person typing in the TUI (a pty) is recorded as ``human_direct_message`` while ``opencode run``
prompts in the same session are not; deleting the session gives ``upstream_missing`` after three misses.

Without the plugin the conservative rule decides (a prompt equal to one of the session's earlier ones
is no person's). The reader, on a real OpenCode database: a locked database and a schema without the
event table are inconclusive (no error, no miss), and the scan goes on once the lock is gone.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.hosts.opencode.database import Unreadable
from sessionwatch.hosts.opencode.reader import GONE, Found, OpenCodeCatalog
from tests.hosts.opencode_home import OpenCodeHome
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel
from tests.support.tui import Tui
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

MANAGER, OTHER = "agent:main:main", "agent:main:other"


class World:
    def __init__(self, root: Path, model: FakeModel, *, plugin: bool = True) -> None:
        self.model = model
        self.h = OpenCodeHome(root, model.url)
        state = root / "state"
        self.h.extra_env["XDG_STATE_HOME"] = str(state)
        self.store = f"sqlite:///{state / 'sessionwatch' / 'sessionwatch.db'}"
        if plugin:
            out = self.sessionwatch("install", "opencode", "--dir", str(self.h.project))
            assert "opencode-plugin.js" in out
        else:
            (state / "sessionwatch").mkdir(parents=True)
            Gateway.open(self.store, timers=False).close()
        self.gw = Gateway.open(self.store, timers=False)
        self.gw.upstream.configure(opencode_db=self.h.db_path)
        self.gw.put_session(MANAGER)

    def sessionwatch(self, *args: str) -> str:
        env = {**os.environ, **self.h.env()}
        for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_TOKEN"):
            env.pop(name, None)
        out = subprocess.run([*SESSIONWATCH, *args], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    def run(self, text: str, *more: str) -> None:
        res = self.h.prompt(text, *more)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    def key(self, sid: str) -> str:
        return f"agent:project:opencode:{sid}"

    def events(self, key: str, kind: str | None = None) -> list[dict[str, Any]]:
        events = self.gw.changes_since(key, 0).to_json()["events"]
        return [e for e in events if kind is None or e["kind"] == kind]

    def stored(self, needle: str) -> int:
        """Rows of OpenCode's database holding ``needle`` (messages, parts, events)."""
        like = f"%{needle}%"
        return sum(
            self.h.query(f"SELECT count(*) FROM {table} WHERE data LIKE ?", like)[0][0]
            for table in ("message", "part", "event")
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with FakeModel("chat", default="noted") as model:
        w = World(tmp_path, model)
        try:
            yield w
        finally:
            w.gw.close()


def test_a_notice_reaches_the_next_model_call_once_is_not_stored_and_a_deleted_session_goes_missing(
    world: World,
) -> None:
    w = world
    w.run("set up the project")
    (sid,) = w.h.sessions()
    key = w.key(sid)
    link = w.gw.link(key)
    assert link is not None and link["catalogId"] == "opencode" and link["threadId"] == sid  # adopted on its start
    states = [e["kind"] for e in w.events(key) if e["kind"].startswith("session_")]
    assert states == ["session_idle", "session_working", "session_idle"], states
    assert w.gw.get_session(key)["lifecycle"]["state"] == "idle"

    # the OpenCode session watches another one, which a person changes
    w.gw.put_session(OTHER)
    assert w.gw.watch(key, OTHER)
    w.gw.inbound(OTHER, "rotate the keys first", channel="slack")
    assert len(w.gw.peek_system_events(key)) == 1

    before = len(w.model.requests)
    w.run("carry on", "--session", sid)
    calls = w.model.requests[before:]
    told = [i for i, r in enumerate(calls) if any(OTHER in t for t in w.model.texts(r))]
    assert told == [0], f"{len(calls)} calls, the notice in {told}"
    system = [m["content"] for m in calls[0]["messages"] if m["role"] == "system"]
    assert any(OTHER in s and s.startswith("System: [") for s in system)  # in the call's system text
    assert w.stored(OTHER) == 0  # OpenCode never stored it

    before = len(w.model.requests)
    w.run("and now?", "--session", sid)
    assert not any(OTHER in t for r in w.model.requests[before:] for t in w.model.texts(r))  # once
    assert w.gw.peek_system_events(key) == []

    # the session is deleted in OpenCode: three definitive misses, then upstream_missing
    assert w.gw.watch(MANAGER, key)
    out = w.h.run("session", "delete", sid)
    assert out.returncode == 0, out.stderr[-1000:]
    assert sid not in w.h.sessions()
    statuses = [w.gw.upstream_tick()["links"][0]["status"] for _ in range(3)]
    assert statuses == ["missing", "missing", "removed"], statuses
    assert len(w.events(key, "upstream_missing")) == 1
    assert w.gw.link(key) is None
    assert any(key in e["text"] for e in w.gw.peek_system_events(MANAGER))


def test_a_person_typing_in_the_tui_is_recorded_and_opencode_run_in_the_same_session_is_not(world: World) -> None:
    w = world
    with Tui(w.h) as tui:
        tui.wait_for(r"Ask anything", timeout=120)
        time.sleep(1)  # the prompt box takes keys a moment after it is drawn
        tui.type("set up the project")
        wait_until(lambda: w.model.seen("set up the project"), timeout=60, what="the first prompt at the model")
        (sid,) = w.h.sessions()
        key = w.key(sid)
        assert w.gw.watch(MANAGER, key)
        typed_at = time.monotonic()
        tui.type("stop, ship it on Friday instead")
        humans = wait_until(
            lambda: w.events(key, "human_direct_message"), timeout=30, interval=0.1, what="the person's prompt"
        )
        print(f"recorded {time.monotonic() - typed_at:.2f} s after Enter (the plugin's nudge)")
        wait_until(lambda: w.gw.get_session(key).get("lifecycle", {}).get("state") == "idle", timeout=30)
    assert [e["actorType"] for e in humans] == ["human"]
    assert len(w.gw.peek_system_events(MANAGER)) == 1  # the manager is told once

    # programs in the same session: the same words, and new ones, through `opencode run`
    w.run("stop, ship it on Friday instead", "--session", sid)
    w.run("deploy on Monday", "--session", sid)
    result = w.gw.upstream_tick()["links"][0]
    assert result["status"] in ("advanced", "unchanged"), result
    assert len(w.events(key, "human_direct_message")) == 1
    assert len(w.gw.peek_system_events(MANAGER)) == 1


def test_without_the_plugin_a_repeated_prompt_is_no_person(tmp_path: Path) -> None:
    with FakeModel("chat", default="noted") as model:
        w = World(tmp_path, model, plugin=False)
        try:
            w.run("look at the logs")
            (sid,) = w.h.sessions()
            key = w.key(sid)
            adopted = w.gw.continue_thread("opencode", sid, session_key=key)
            assert adopted["linked"], adopted
            assert w.gw.watch(MANAGER, key)
            w.run("look at the logs", "--session", sid)  # a replay, or a program repeating itself
            assert w.gw.upstream_tick()["links"][0]["status"] == "advanced"
            assert w.events(key, "human_direct_message") == []
            w.run("now check the disk", "--session", sid)  # new words: taken for a person without the plugin
            assert w.gw.upstream_tick()["links"][0]["status"] == "recorded"
            assert len(w.events(key, "human_direct_message")) == 1
        finally:
            w.gw.close()


# -- the reader on a real database -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A database OpenCode wrote: one session, one prompt."""
    root = tmp_path_factory.mktemp("opencode-db")
    with FakeModel("chat", default="noted") as model:
        h = OpenCodeHome(root, model.url)
        res = h.prompt("the only prompt")
        assert res.returncode == 0, res.stderr[-2000:]
        (sid,) = h.sessions()
        yield h.db_path, sid


def _copy(db: Path, to: Path) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    dst = sqlite3.connect(to / "opencode.db")
    src.backup(dst)
    src.close()
    dst.execute("PRAGMA journal_mode=WAL")
    dst.close()
    return to / "opencode.db"


def test_the_reader_finds_the_prompt_in_a_real_database(real_db: tuple[Path, str], tmp_path: Path) -> None:
    db, sid = real_db
    catalog = OpenCodeCatalog(_copy(db, tmp_path))
    (thread,) = catalog.list_threads()
    assert thread["threadId"] == sid and thread["cwd"].endswith("project")
    assert catalog.list_threads(folder="/nowhere") == []
    found = catalog.scan(sid, {"seq": -1}, list)
    assert isinstance(found, Found) and found.turns == 1
    again = catalog.scan(sid, found.next_marker, list)
    assert again is None  # nothing new
    assert catalog.scan(sid, {"seq": -1}, lambda: ["the only prompt"]).turns == 0  # type: ignore[union-attr]
    assert catalog.scan("ses_nope", {"seq": -1}, list) == GONE


def test_the_reader_waits_out_a_locked_database_and_a_schema_it_does_not_know(
    real_db: tuple[Path, str], tmp_path: Path
) -> None:
    db, sid = real_db
    path = _copy(db, tmp_path / "locked")
    catalog = OpenCodeCatalog(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE session SET title = title")
    try:
        started = time.monotonic()
        assert catalog.scan(sid, {"seq": -1}, list) is None  # inconclusive: not gone, no error
        assert time.monotonic() - started < 3
        with pytest.raises(Unreadable):
            catalog.list_threads()
    finally:
        holder.execute("COMMIT")
        holder.close()
    found = catalog.scan(sid, {"seq": -1}, list)
    assert isinstance(found, Found) and found.turns == 1

    moved = _copy(db, tmp_path / "moved")
    conn = sqlite3.connect(moved)
    conn.execute("DROP TABLE event")
    conn.commit()
    conn.close()
    catalog = OpenCodeCatalog(moved)
    assert catalog.scan(sid, {"seq": -1}, list) is None
    with pytest.raises(Unreadable):
        catalog.list_threads()
    gw = Gateway.open(f"sqlite:///{tmp_path / 'sw.db'}", timers=False)
    try:
        gw.upstream.configure(opencode_db=moved)
        assert gw.list_threads("opencode") == []
        gw.put_session(MANAGER)
        res = gw.continue_thread("opencode", sid, session_key="agent:main:oc")
        assert res["linked"] is False and "lacks event" in res["reason"]
    finally:
        gw.close()
    shutil.rmtree(tmp_path / "moved")


def test_through_a_gateway_the_plugin_delivers_once_and_a_gateway_gone_never_breaks_opencode(tmp_path: Path) -> None:
    """Installed with ``--gateway``: the plugin's hook runs post to the gateway (no store on this machine
    is opened), the session is made and adopted there, a notice reaches the next call once; with the
    gateway gone, OpenCode still answers and the notice waits."""
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    token = "tok-" + "5" * 28
    with FakeModel("chat", default="noted") as model:
        h = OpenCodeHome(tmp_path, model.url)
        store = f"sqlite:///{tmp_path / 'gateway.db'}"
        Gateway.open(store, timers=False).close()
        sock = listening_socket()
        url = url_of(sock)
        server = spawn_serving(
            [*SESSIONWATCH, "serve", "--store", store, "--no-monitor", "--token", token],
            sock,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "gateway-state")},
        )
        try:
            wait_http(f"{url}/v1/health", server, timeout=60)
            h.extra_env.update(XDG_STATE_HOME=str(tmp_path / "state"), SESSIONWATCH_TOKEN=token)
            env = {**os.environ, **h.env()}
            env.pop("SESSIONWATCH_STORE", None)
            out = subprocess.run(
                [*SESSIONWATCH, "--gateway", url, "install", "opencode", "--dir", str(h.project)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            assert token not in "".join(p.read_text() for p in h.project.rglob("*") if p.is_file())

            res = h.prompt("set up the project")
            assert res.returncode == 0, res.stderr[-2000:]
            (sid,) = h.sessions()
            key = f"agent:project:opencode:{sid}"
            with Gateway.open(store, timers=False) as gw:  # the gateway's store: the session was made there
                assert gw.get_session(key)["lifecycle"]["state"] == "idle"
                gw.put_session(OTHER)
                assert gw.watch(key, OTHER)
                gw.inbound(OTHER, "rotate the keys first", channel="slack")
            before = len(model.requests)
            res = h.prompt("carry on", "--session", sid)
            assert res.returncode == 0, res.stderr[-2000:]
            told = [i for i, r in enumerate(model.requests[before:]) if any(OTHER in t for t in model.texts(r))]
            assert told == [0], told

            with Gateway.open(store, timers=False) as gw:
                gw.inbound(OTHER, "and the certificates", channel="slack")
            stop(server)  # the gateway is gone: OpenCode answers all the same, the notice waits
            begun = time.monotonic()
            res = h.prompt("anything else?", "--session", sid)
            assert res.returncode == 0 and "noted" in res.stdout, res.stderr[-2000:]
            assert time.monotonic() - begun < 60
            with Gateway.open(store, timers=False) as gw:
                assert len(gw.peek_system_events(key)) == 1  # nothing lost
        finally:
            stop(server)


def test_a_subagent_session_is_a_child_its_parent_watches_and_its_end_tells_the_parent_once(world: World) -> None:
    """OpenCode's task tool runs a subagent in a session of its own (``parent_id``): the plugin makes it
    ``agent:project:subagent:<its session id>``, spawned by the parent's key (which watches it from its
    spawn), and the subagent's end tells the parent once."""
    from tests.support.fake_model import Reply

    TASK = "subtask-7731: list the files"  # a text no prompt of OpenCode's own holds
    w = world

    def respond(request: dict[str, Any]) -> Reply:
        if not w.model.tool_names(request):
            return Reply.say("A survey")  # the title OpenCode asks for alongside
        if w.model.tool_results(request):
            return Reply.say("done")  # the parent, after the task returned
        if any(TASK in t for t in w.model.texts(request)):
            return Reply.say("the subagent found two files")  # the subagent's own answer
        return Reply.call("task", {"description": "survey", "prompt": TASK, "subagent_type": "general"})

    w.model.respond = respond
    w.run("delegate a survey")
    (sid,) = w.h.sessions()
    children = [r[0] for r in w.h.query("SELECT id FROM session WHERE parent_id = ?", sid)]
    assert len(children) == 1, [w.model.texts(r)[-1:] for r in w.model.requests]
    parent, child = w.key(sid), f"agent:project:subagent:{children[0]}"
    info = wait_until(lambda: w.gw.get_session(child), timeout=30, what="the subagent's session")
    assert info["spawnedBy"] == parent, info
    kinds = [e["kind"] for e in w.events(child)]
    assert "session_ended" in kinds, kinds
    told = [e for e in w.gw.peek_system_events(parent) if child in e["text"]]
    assert len(told) == 1, w.gw.peek_system_events(parent)


def test_a_permission_asked_in_the_tui_shows_the_session_waiting_and_the_answer_working(world: World) -> None:
    """A tool call the config says to ask about: OpenCode asks the person in the TUI, and the plugin
    reports ``waiting``; the person allows it and the session is ``working`` again, then ``idle``."""
    import json as _json

    from tests.support.fake_model import Reply

    w = world
    config = _json.loads((w.h.project / "opencode.json").read_text())
    config["permission"] = {"bash": "ask"}
    (w.h.project / "opencode.json").write_text(_json.dumps(config, indent=2))

    def respond(request: dict[str, Any]) -> Reply:
        if not w.model.tool_names(request):
            return Reply.say("A check")  # the title
        if w.model.tool_results(request):
            return Reply.say("done")
        return Reply.call("bash", {"command": "echo checked", "description": "a check"})

    w.model.respond = respond
    with Tui(w.h) as tui:
        tui.wait_for(r"Ask anything", timeout=120)
        time.sleep(1)  # the prompt box takes keys a moment after it is drawn
        tui.type("run the check")
        (sid,) = wait_until(w.h.sessions, timeout=60, what="the session")
        key = w.key(sid)

        def state() -> str | None:
            session = w.gw.get_session(key) if w.gw.store.get_session(key, "project") else None
            return (session or {}).get("lifecycle", {}).get("state")

        wait_until(lambda: state() == "waiting", timeout=60, what=f"waiting; screen: {tui.screen[-600:]!r}")
        tui.type("", enter=True)  # Enter: the dialog's first choice, allow once
        wait_until(lambda: state() == "idle" and w.model.tool_results(w.model.requests[-1]), timeout=60)
    kinds = [e["kind"] for e in w.events(key) if e["kind"].startswith("session_")]
    waited = kinds.index("session_waiting")
    assert "session_working" in kinds[waited:], kinds
