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

import itertools
import json
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
from sessionwatch.engine.tools import TOOLS as TOOL_NAMES
from sessionwatch.hosts.opencode import sources
from sessionwatch.hosts.opencode.database import Unreadable
from sessionwatch.hosts.opencode.reader import GONE, Found, OpenCodeCatalog
from tests.hosts.opencode_home import OpenCodeHome
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply
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
    # `opencode run` done: OpenCode shuts the plugin down, which reports the end before the process exits
    assert states == ["session_idle", "session_working", "session_idle", "session_ended"], states
    assert w.gw.get_session(key)["lifecycle"]["state"] == "ended"

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
    second = "stop, ship it on Friday instead"

    def prompt_time(text: str) -> int:
        (row,) = w.h.query(
            "SELECT m.time_created FROM message m JOIN part p ON p.message_id = m.id"
            " WHERE m.session_id = ? AND json_extract(p.data, '$.text') = ?",
            sid,
            text,
        )
        return int(row[0])

    with Tui(w.h) as tui:
        tui.wait_for(r"Ask anything", timeout=120)
        time.sleep(1)  # the prompt box takes keys a moment after it is drawn
        tui.type("set up the project")
        wait_until(lambda: w.model.seen("set up the project"), timeout=60, what="the first prompt at the model")
        (sid,) = w.h.sessions()
        key = w.key(sid)
        assert w.gw.watch(MANAGER, key)

        # the first turn over before the person types again (on a busy machine a prompt typed while the TUI
        # was still answering did not always reach OpenCode's database)
        def first_turn_over() -> bool:
            worked = any(e["kind"] == "session_working" for e in w.events(key))
            return worked and w.gw.get_session(key).get("lifecycle", {}).get("state") == "idle"

        wait_until(first_turn_over, timeout=60, what="the first turn over")
        typed_at = time.monotonic()
        tui.type(second)
        # A person's prompt found while nobody watched stays pending until someone does, so the first
        # prompt is recorded too: alone, or with the second as one burst that carries the newest time.
        humans = wait_until(
            lambda: [e for e in w.events(key, "human_direct_message") if e["occurredAt"] == prompt_time(second)],
            timeout=30,
            interval=0.1,
            what="the person's prompt, with its own time",
        )
        print(f"recorded {time.monotonic() - typed_at:.2f} s after Enter (the plugin's nudge)")
        wait_until(lambda: w.gw.get_session(key).get("lifecycle", {}).get("state") == "idle", timeout=30)
    recorded = w.events(key, "human_direct_message")
    assert [e["actorType"] for e in recorded] == ["human"] * len(recorded) and len(humans) == 1
    # with the prompt's own time (OpenCode's row, above), not the time the monitor found it
    assert len(w.gw.peek_system_events(MANAGER)) == 1  # the manager is told once

    # programs in the same session: the same words, and new ones, through `opencode run`
    w.run(second, "--session", sid)
    w.run("deploy on Monday", "--session", sid)
    result = w.gw.upstream_tick()["links"][0]
    assert result["status"] in ("advanced", "unchanged"), result
    assert w.events(key, "human_direct_message") == recorded  # neither was a person's
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


# -- the tools: installed means usable ----------------------------------------------------------------------
TOOLS = {f"sessionwatch_{name}" for name in TOOL_NAMES}  # OpenCode names a server's tools <server>_<tool>


def reconcile_with(model: FakeModel, target: str) -> None:
    """The model answers each turn's first call with a session_status call (changesSince 0 on ``target``),
    then with text; OpenCode's title call gets a title."""

    def respond(request: dict[str, Any]) -> Reply:
        if not model.tool_names(request):
            return Reply.say("A title")
        if (request.get("messages") or [{}])[-1].get("role") == "tool":  # this turn's call was answered
            return Reply.say("reconciled")
        return Reply.call("sessionwatch_session_status", {"sessionKey": target, "changesSince": 0})

    model.respond = respond


def delta_results(model: FakeModel) -> list[str]:
    results = [r for req in model.requests for r in model.tool_results(req)]
    return [r for r in results if "human_direct_message" in r and "stateChanges" in r]


def first_turn(model: FakeModel, since: int = 0) -> int:
    """The index of the first request of a turn after ``since`` (OpenCode's title call has no tools)."""
    return next(i for i, r in enumerate(model.requests) if i >= since and model.tool_names(r))


def test_each_session_calls_the_tools_as_itself_from_its_first_request_and_a_reconcile_returns_the_delta_once(
    world: World,
) -> None:
    """Installed without --session: OpenCode starts one ``sessionwatch mcp`` for all its sessions, the
    plugin names the calling session in each call. The tools are in the first request; the session's
    scripted ``session_status`` with ``changesSince`` is permitted, runs as the session's own key, returns
    the delta once and reconciles: the notice, given to the turn's first call, never comes again."""
    w = world
    w.run("set up the project")
    (sid,) = w.h.sessions()
    key = w.key(sid)
    first = w.model.requests[first_turn(w.model)]
    assert set(w.model.tool_names(first)) >= TOOLS, w.model.tool_names(first)
    status = next(t["function"] for t in first["tools"] if t["function"]["name"] == "sessionwatch_session_status")
    assert "changesSince" in json.dumps(status["parameters"])

    w.gw.put_session(OTHER)
    assert w.gw.watch(key, OTHER)
    w.gw.inbound(OTHER, "rotate the keys first", channel="slack")
    (notice,) = [e["line"] for e in w.gw.peek_system_events(key)]
    reconcile_with(w.model, OTHER)
    before = len(w.model.requests)
    w.run("what changed?", "--session", sid)
    turn = first_turn(w.model, before)
    assert w.model.seen(notice) == [turn], (w.model.seen(notice), w.h.hook_log())  # once, in the turn's first call
    (delta,) = delta_results(w.model)  # permitted, answered, and read by the model
    assert delta.count('"stateChanges"') == 1 and notice not in delta, delta  # the delta once, no notice again
    assert w.gw.peek_system_events(key) == []  # reconciled
    assert _own_keys(w) == [key]  # the call ran as the session's own key: no other session was made
    # the session the plugin adds to each call is the server's alone: no model call ever reads it
    assert not any("_sessionwatch" in json.dumps(r) for r in w.model.requests)
    stored = w.h.query("SELECT data FROM part WHERE json_extract(data, '$.tool') = 'sessionwatch_session_status'")
    assert len(stored) == 1 and json.loads(stored[0][0])["state"]["status"] == "completed", stored


def test_tools_are_permitted_under_a_config_that_asks_and_uninstall_gives_the_config_back_byte_for_byte(
    tmp_path: Path,
) -> None:
    """A project whose opencode.json asks before every tool (``opencode run`` answers such a question with a
    refusal): install with --session adds the server and the rule that lets the model call our tools, so
    the reconcile call is answered; doctor reports the server starting and listing the tools, and the
    tools permitted; uninstall gives the file back byte for byte."""
    with FakeModel("chat", default="noted") as model:
        w = World(tmp_path, model, plugin=False)
        try:
            config = w.h.project / "opencode.json"
            cautious = {**json.loads(config.read_text()), "permission": {"*": "ask"}}
            config.write_text(json.dumps(cautious, indent=4))  # a layout of the person's own
            before = config.read_bytes()
            w.sessionwatch("install", "opencode", "--dir", str(w.h.project), "--session", MANAGER)
            written = json.loads(config.read_text())
            assert written["permission"] == {"*": "ask", "sessionwatch_*": "allow"}  # after theirs: it wins
            assert written["mcp"]["sessionwatch"]["command"] == ["sessionwatch", "mcp", "--session", MANAGER]

            doctor = json.loads(w.sessionwatch("doctor", "opencode", "--dir", str(w.h.project), "--json"))
            (scope,) = [s for s in doctor["hosts"][0]["scopes"] if s["scope"] == "project"]
            checks = {c["check"]: c for c in scope["checks"]}
            assert checks["mcp"]["ok"] and "6 tools listed" in checks["mcp"]["detail"], checks["mcp"]
            assert checks["permitted"]["ok"], checks["permitted"]

            w.gw.put_session(OTHER)
            assert w.gw.watch(MANAGER, OTHER)
            w.gw.inbound(OTHER, "rotate the keys first", channel="slack")
            reconcile_with(model, OTHER)
            w.run("what changed?")
            results = [r for req in model.requests for r in model.tool_results(req)]
            assert not any("rejected" in r for r in results), results
            assert len(delta_results(model)) == 1, results
            assert w.gw.peek_system_events(MANAGER) == []

            w.sessionwatch("uninstall", "opencode", "--dir", str(w.h.project))
            assert config.read_bytes() == before
            assert not (w.h.project / ".sessionwatch").exists()
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


def test_a_session_adopted_as_it_starts_has_its_first_prompt_judged_too(
    real_db: tuple[Path, str], tmp_path: Path
) -> None:
    """The plugin adopts a session on ``session.created``, which comes with its first prompt: when that
    prompt is stored already, the adoption still reads it, judged by the plugin's record; an adoption of
    an older session, or one without the plugin's records, starts after it (history)."""
    db, sid = real_db
    path = _copy(db, tmp_path / "db")
    sql = "SELECT id FROM message WHERE session_id = ? AND json_extract(data, '$.role') = 'user'"
    (mid,) = [r[0] for r in sqlite3.connect(path).execute(sql, (sid,))]

    def started(ago_ms: int) -> None:
        conn = sqlite3.connect(path)
        conn.execute("UPDATE session SET time_created = ? WHERE id = ?", (int(time.time() * 1000) - ago_ms, sid))
        conn.commit()
        conn.close()

    catalog = OpenCodeCatalog(path)
    started(1000)
    assert catalog.scan(sid, catalog.baseline(sid), list) is None  # no plugin records: history
    record = sources.path_for(path, sid)
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"messageID": mid, "source": "person", "why": "the TUI", "at": 0}) + "\n")
    found = catalog.scan(sid, catalog.baseline(sid), list)
    assert isinstance(found, Found) and found.turns == 1 and "from" not in found.next_marker, found
    started(120_000)  # adopted long after it started
    assert catalog.scan(sid, catalog.baseline(sid), list) is None


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
    is opened), the session is made and adopted there, a notice reaches the next call once and the
    model's reconcile call is answered through the gateway; with the gateway gone, OpenCode still answers
    (the tool call an error result) and the notice waits."""
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
                assert gw.get_session(key)["lifecycle"]["state"] == "ended"  # the run is over
                gw.put_session(OTHER)
                assert gw.watch(key, OTHER)
                gw.inbound(OTHER, "rotate the keys first", channel="slack")
                (notice,) = [e["line"] for e in gw.peek_system_events(key)]
            before = len(model.requests)
            reconcile_with(model, OTHER)  # the model reconciles: the MCP server answers through the gateway too
            res = h.prompt("carry on", "--session", sid)
            assert res.returncode == 0, res.stderr[-2000:]
            assert [i - before for i in model.seen(notice)] == [0], model.seen(notice)
            assert len(delta_results(model)) == 1
            with Gateway.open(store, timers=False) as gw:
                assert gw.peek_system_events(key) == []  # reconciled

            with Gateway.open(store, timers=False) as gw:
                gw.inbound(OTHER, "and the certificates", channel="slack")
            stop(server)  # the gateway is gone: OpenCode answers all the same, the notice waits
            begun = time.monotonic()
            res = h.prompt("anything else?", "--session", sid)
            assert res.returncode == 0 and "reconciled" in res.stdout, res.stderr[-2000:]
            assert time.monotonic() - begun < 60
            failed = model.tool_results(model.requests[-1])[-1]  # the tool call: an error result the model reads
            assert "unavailable" in failed, failed
            with Gateway.open(store, timers=False) as gw:
                assert len(gw.peek_system_events(key)) == 1  # nothing lost
        finally:
            stop(server)


def test_a_subagent_session_is_a_child_its_parent_watches_and_its_end_tells_the_parent_once(world: World) -> None:
    """OpenCode's task tool runs a subagent in a session of its own (``parent_id``): the plugin makes it
    ``agent:project:subagent:<its session id>``, spawned by the parent's key (which watches it from its
    spawn), and the subagent's end tells the parent once."""

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


def _own_keys(w: World) -> list[str]:
    rows = w.gw.call_tool("sessions_list", {"limit": 100}, caller=MANAGER)["sessions"]
    return sorted(s["sessionKey"] for s in rows if s["sessionKey"].startswith("agent:project:opencode:"))


def test_two_sessions_in_one_folder_get_two_keys_and_a_resumed_one_keeps_its_own(world: World) -> None:
    w = world
    w.run("first")
    w.run("second")
    ids = w.h.sessions()
    assert len(ids) == 2, ids
    expected = sorted(w.key(sid) for sid in ids)
    assert _own_keys(w) == expected, w.h.hook_log()
    for key in expected:  # adopted: a person typing into it later is detected
        link = w.gw.link(key)
        assert link is not None and link["threadId"] == key.rsplit(":", 1)[1], w.h.hook_log()
    w.run("third", "--session", ids[0])
    assert _own_keys(w) == expected  # the resumed session is the same key, no third one


def test_a_change_during_a_tool_loop_reaches_the_same_turn(world: World) -> None:
    """The plugin's system transform runs before every model call of a turn: a change that lands while
    OpenCode runs a tool reaches the call after the tool, once, and is stored nowhere."""

    w = world
    (w.h.project / "notes.txt").write_text("the brief is due on Friday\n")
    notice: list[str] = []

    def change() -> None:  # the session exists by now: it starts watching, and a person writes there
        (sid,) = w.h.sessions()
        w.gw.put_session(OTHER)
        assert w.gw.watch(w.key(sid), OTHER)
        w.gw.inbound(OTHER, "use the 2024 brief", channel="slack")
        notice.append(w.gw.peek_system_events(w.key(sid))[-1]["text"])

    def respond(request: dict[str, Any]) -> Reply:
        if not w.model.tool_names(request):
            return Reply.say("Notes")  # the title
        if w.model.tool_results(request):
            return Reply.say("done reading")
        return Reply.call("read", {"filePath": str(w.h.project / "notes.txt")}, before=change)

    w.model.respond = respond
    w.run("read notes.txt")
    assert notice, "the tool was never called"
    turn = [i for i, r in enumerate(w.model.requests) if w.model.tool_names(r)]
    told = w.model.seen(notice[0])
    assert len(turn) == 2 and told == [turn[1]], (turn, told, w.h.hook_log())  # the call after the tool
    assert w.model.tool_results(w.model.requests[told[0]])
    assert w.stored(notice[0]) == 0


def test_a_subagent_session_never_takes_its_parents_notice(world: World) -> None:
    """The change lands while the task tool's subagent runs a tool of its own: the subagent's next call
    does not get the parent's notice (its calls carry its own session id), the parent's next call does."""

    TASK = "subtask-4417: read the notes"
    w = world
    (w.h.project / "notes.txt").write_text("the brief is due on Friday\n")
    notice: list[str] = []

    def change() -> None:
        (sid,) = w.h.sessions()
        w.gw.put_session(OTHER)
        assert w.gw.watch(w.key(sid), OTHER)
        w.gw.inbound(OTHER, "use the 2024 brief", channel="slack")
        notice.append(w.gw.peek_system_events(w.key(sid))[-1]["text"])

    def is_sub(request: dict[str, Any]) -> bool:
        texts = w.model.texts(request)
        return any(TASK in t for t in texts) and not any("delegate the reading" in t for t in texts)

    def respond(request: dict[str, Any]) -> Reply:
        if not w.model.tool_names(request):
            return Reply.say("Reading")  # titles
        done = w.model.tool_results(request)
        if is_sub(request):
            if not done:
                return Reply.call("read", {"filePath": str(w.h.project / "notes.txt")}, before=change)
            return Reply.say("the notes say Friday")
        if done:
            return Reply.say("main done")
        return Reply.call("task", {"description": "read", "prompt": TASK, "subagent_type": "general"})

    w.model.respond = respond
    w.run("delegate the reading")
    assert notice, "the subagent never ran its tool"
    reqs = w.model.requests
    told = w.model.seen(notice[0])
    assert len(told) == 1, (told, w.h.hook_log())
    assert not is_sub(reqs[told[0]]) and w.model.tool_results(reqs[told[0]]), "not the parent's call after the task"
    sub_after = [i for i, r in enumerate(reqs) if is_sub(r) and w.model.tool_results(r)]
    assert sub_after and not set(sub_after) & set(told)  # the subagent's call after its tool: not there
    (sid,) = w.h.sessions()
    assert w.gw.peek_system_events(w.key(sid))  # handed out, acknowledged by the parent's next run


def test_an_opencode_killed_while_working_is_lost_and_its_parent_told_once(world: World) -> None:
    """A worker spawned by the manager runs in OpenCode, killed (kill -9) in the middle of a turn: the
    plugin's reports carry OpenCode's own pid; with nothing heard for the configured time and that
    process gone, the gateway's timer makes the worker lost and the manager is told once."""
    import signal

    from sessionwatch.settings import Settings
    from tests.hosts.lost_timer import LOST_AFTER_MS, HangingTurn, lost_timer

    w = world
    worker = "agent:main:subagent:worker"
    assert "error" not in w.gw.call_tool("sessions_spawn", {"sessionKey": worker}, caller=MANAGER)
    w.sessionwatch("install", "opencode", "--dir", str(w.h.project), "--session", worker)
    w.h.extra_env["SESSIONWATCH_LOST_AFTER_MS"] = str(LOST_AFTER_MS)
    assert Settings().lost_after_ms > LOST_AFTER_MS  # only the gateway below has the short limit
    with lost_timer(w.store, w.h.env()), HangingTurn(w.model) as turn:
        proc = subprocess.Popen(
            [str(w.h.binary), "run", "long job"],
            cwd=w.h.project,
            env=w.h.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert turn.started.wait(120), "the turn never reached the model"

            def lifecycle() -> Any:
                return w.gw.store.get_lifecycle(worker, "main")

            wait_until(lambda: lifecycle() is not None and lifecycle().state == "working", timeout=60)
            assert lifecycle().pid == proc.pid  # OpenCode's process, not the hook's
            time.sleep(LOST_AFTER_MS * 3 / 1000)  # quiet for longer than the limit, but its process runs
            assert lifecycle().state == "working"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            wait_until(lambda: lifecycle().state == "lost", timeout=60, what="the worker lost")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    kinds = [e["kind"] for e in w.events(worker)]
    assert kinds.count("session_lost") == 1 and kinds[-1] == "session_lost", kinds
    notices = w.gw.peek_system_events(MANAGER)
    assert len(notices) == 1 and worker in notices[0]["line"], notices
    listed = w.gw.call_tool("sessions_list", {"lifecycle": "lost"}, caller=MANAGER)["sessions"]
    assert [s["sessionKey"] for s in listed] == [worker]


def test_installed_for_the_user_opencode_loads_the_plugin_in_any_project(tmp_path: Path) -> None:
    """``install opencode --user`` writes the plugin into OpenCode's own config folder (by its absolute
    path, with this installation's command): OpenCode loads it for a project that has no entry of its
    own, and each session there is made, adopted and reported under the project folder's agent."""
    with FakeModel("chat", default="noted") as model:
        w = World(tmp_path, model, plugin=False)
        try:
            w.sessionwatch("install", "opencode", "--user")
            config = w.h.home / ".config" / "opencode"
            assert json.loads((config / "opencode.json").read_text())["plugin"] == [
                str(config / "sessionwatch" / "plugin.js")
            ]
            assert "plugin" not in json.loads((w.h.project / "opencode.json").read_text())
            w.run("set up the project")
            (sid,) = w.h.sessions()
            key = w.key(sid)  # --user: the agent is the folder the session runs in
            link = w.gw.link(key)
            assert link is not None and link["threadId"] == sid, w.h.hook_log()
            states = [e["kind"] for e in w.events(key) if e["kind"].startswith("session_")]
            assert states[0] == "session_idle" and states[-1] == "session_ended", states
            w.sessionwatch("uninstall", "opencode", "--user")
            assert not (config / "sessionwatch").exists()
        finally:
            w.gw.close()


def _path_without_sessionwatch() -> str:
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "sessionwatch").exists()
    )


def test_with_sessionwatch_missing_from_path_opencode_answers_as_usual(world: World) -> None:
    """The plugin runs ``sessionwatch`` from PATH: when it is not there, every hook run fails to start,
    and OpenCode still answers the model's reply, in the TUI's time; what is pending stays queued."""
    w = world
    w.gw.put_session(OTHER)
    assert w.gw.watch(MANAGER, OTHER)
    w.gw.inbound(OTHER, "rotate the keys first", channel="slack")
    w.h.extra_env["PATH"] = _path_without_sessionwatch()
    assert shutil.which("sessionwatch", path=w.h.env()["PATH"]) is None
    res = w.h.prompt("set up the project")
    assert res.returncode == 0 and "noted" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    assert w.model.seen("set up the project"), "the prompt never reached the model"
    assert len(w.gw.peek_system_events(MANAGER)) == 1  # nothing consumed


# -- what OpenCode writes that is no person's ----------------------------------------------------------------
REPLAYED = "REPLAYME: tidy the logs"


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A database the real OpenCode wrote with the plugin installed: a prompt, then one the provider refuses
    as too long, so OpenCode compacts the session (a ``compaction`` message and its summary) and replays
    the refused prompt as a new user message, without ``chat.message``."""

    root = tmp_path_factory.mktemp("opencode-compacted")
    with FakeModel("chat", default="noted") as model:
        w = World(root, model)
        try:
            refused: list[int] = []

            def respond(request: dict[str, Any]) -> Reply | None:
                if model.tool_names(request) and any(REPLAYED in t for t in model.texts(request)) and not refused:
                    refused.append(1)
                    return Reply.fail(400, "This model's maximum context length is 100 tokens, your messages had 5000")
                return None

            w.run("first words")
            (sid,) = w.h.sessions()
            model.respond = respond
            w.h.prompt(REPLAYED, "--session", sid)  # exits 1 after recovering: it reports the refusal
            kinds = [r[0] for r in w.h.query("SELECT json_extract(data, '$.type') FROM part WHERE session_id = ?", sid)]
            assert refused and "compaction" in kinds, kinds
            yield w.h.db_path, sid
        finally:
            w.gw.close()


def _copy_with_records(db: Path, to: Path) -> Path:
    """The database and the plugin's records beside it."""
    path = _copy(db, to)
    shutil.copytree(db.parent / "sessionwatch", to / "sessionwatch")
    return path


class Writer:
    """Rows added the way OpenCode writes them: the row, and its event in the session's sequence."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_seeded{self.n:04d}"

    def event(self, sid: str, kind: str, data: dict[str, Any]) -> None:
        (seq,) = self.conn.execute(
            "SELECT coalesce(max(seq), -1) + 1 FROM event WHERE aggregate_id = ?", (sid,)
        ).fetchone()
        self.conn.execute(
            "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, ?, ?, ?)",
            (self._id("evt"), sid, seq, kind, json.dumps(data)),
        )
        self.conn.execute(
            "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?)"
            " ON CONFLICT (aggregate_id) DO UPDATE SET seq = excluded.seq",
            (sid, seq),
        )

    def message(self, sid: str, role: str, *parts: dict[str, Any]) -> str:
        mid, now = self._id("msg"), int(time.time() * 1000)
        info = {"id": mid, "sessionID": sid, "role": role, "time": {"created": now}}
        self.conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
            (mid, sid, now, now, json.dumps({k: v for k, v in info.items() if k not in ("id", "sessionID")})),
        )
        self.event(sid, "message.updated.1", {"sessionID": sid, "info": info})
        for part in parts:
            pid = self._id("prt")
            self.conn.execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (pid, mid, sid, now, now, json.dumps(part)),
            )
            self.event(
                sid,
                "message.part.updated.1",
                {"sessionID": sid, "part": {"id": pid, "sessionID": sid, "messageID": mid, **part}},
            )
        return mid

    def subagent_session(self, parent: str) -> str:
        sid = self._id("ses")
        self.conn.execute(
            "INSERT INTO session"
            " (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated)"
            " SELECT ?, project_id, id, 'sub', directory, 'a subagent', version, time_created, time_updated"
            " FROM session WHERE id = ?",
            (sid, parent),
        )
        self.event(sid, "session.created.1", {"sessionID": sid, "info": {"id": sid, "parentID": parent}})
        return sid


def test_what_opencode_writes_itself_never_counts_as_a_persons_turn_and_never_holds_the_reader(
    compacted: tuple[Path, str], tmp_path: Path
) -> None:
    """From the start of a real session that went through a compaction: the prompts ``opencode run`` sent
    (the plugin said so), the compaction message, the replayed prompt (no ``chat.message``: the plugin
    records it as unknown from its event, and the conservative rule drops the repeat), then what is added
    here as OpenCode writes it (a prompt whose only text is synthetic, a subagent's prompt, a tool output
    and a prompt over 1 MiB): none is a person's turn, and each scan reads to the end at once, never
    waiting for a record or a text that will not come."""
    db, sid = compacted
    path = _copy_with_records(db, tmp_path / "db")
    records = [json.loads(line) for line in sources.path_for(path, sid).read_text().splitlines()]
    assert [r["source"] for r in records] == ["program", "program", "unknown", "unknown"], records  # the two
    # prompts of `opencode run`, then the compaction message and the replay, which entered without chat.message
    catalog = OpenCodeCatalog(path)

    def last_seq(session: str) -> int:
        conn = sqlite3.connect(path)
        try:
            return int(conn.execute("SELECT max(seq) FROM event WHERE aggregate_id = ?", (session,)).fetchone()[0])
        finally:
            conn.close()

    found = catalog.scan(sid, {"seq": -1}, list)
    assert isinstance(found, Found) and found.turns == 0, found
    assert found.next_marker["seq"] == last_seq(sid), found  # read to the end: the replay held nothing up

    w = Writer(path)
    w.message(sid, "user", {"type": "text", "text": "Continue if you have next steps", "synthetic": True})
    big = "x" * (2 << 20)
    w.message(sid, "assistant", {"type": "tool", "tool": "bash", "state": {"status": "completed", "output": big}})
    pasted = w.message(sid, "user", {"type": "text", "text": "y" * (3 << 19)})  # 1.5 MiB, sent by a program
    with sources.path_for(path, sid).open("a") as fh:
        fh.write(json.dumps({"messageID": pasted, "source": "program", "why": "opencode run", "at": 0}) + "\n")
    child = w.subagent_session(sid)
    w.message(child, "user", {"type": "text", "text": "survey the repository"})
    w.conn.close()

    started = time.monotonic()
    again = catalog.scan(sid, found.next_marker, list)
    assert isinstance(again, Found) and again.turns == 0, again
    assert again.next_marker["seq"] == last_seq(sid), again  # nothing waited for
    assert time.monotonic() - started < 10
    sub = catalog.scan(child, {"seq": -1}, list)
    assert isinstance(sub, Found) and sub.turns == 0 and sub.next_marker["seq"] == last_seq(child), sub
    assert [t["threadId"] for t in catalog.list_threads()] == [sid]  # the subagent's session is no thread


def test_an_idle_tui_session_is_pushed_once_per_notice_and_the_turn_gets_the_notice(world: World) -> None:
    """In the TUI, the plugin watches each session's notices (``sessionwatch mcp``, its notices resource): a
    notice that comes while the session is idle starts a turn with one short synthetic prompt, and that
    turn's model call gets the notice. One push per notice; the push acknowledges nothing (the next
    prompt's run does); the pushed prompts are no person's."""
    w = world
    others = (OTHER, "agent:main:another")
    for other in others:
        w.gw.put_session(other)

    def change(other: str) -> str:  # a person writes into a session the OpenCode session watches
        w.gw.inbound(other, "use the 2024 brief", channel="slack")
        return str(next(e["text"] for e in w.gw.peek_system_events(key) if other in e["text"]))

    def idle() -> bool:
        return (w.gw.lifecycle_of(key, "project") or {}).get("state") == "idle"

    def turns_over() -> int:
        kinds = [e["kind"] for e in w.events(key) if e["kind"] in ("session_working", "session_idle")]
        return sum(a == "session_working" and b == "session_idle" for a, b in itertools.pairwise(kinds))

    def pushes() -> list[int]:
        """The turn requests that brought a push prompt first (it stays in the conversation)."""
        counts = [sum(t.startswith("sessionwatch: ") for t in w.model.texts(r)) for r in w.model.requests]
        return [i for i, n in enumerate(counts) if n > max(counts[:i], default=0)]

    with Tui(w.h) as tui:
        tui.wait_for(r"Ask anything", timeout=120)
        time.sleep(1)  # the prompt box takes keys a moment after it is drawn
        tui.type("hello")
        wait_until(lambda: w.model.seen("hello"), timeout=60, what="the first prompt at the model")
        (sid,) = w.h.sessions()
        key = w.key(sid)
        # a new session is idle before its first turn starts: wait for the turn's own end (working, then idle)
        wait_until(lambda: turns_over() == 1 and idle(), timeout=60, what="the first turn over")
        for other in others:
            assert w.gw.watch(key, other)
        first = change(others[0])
        wait_until(lambda: w.model.seen(first), timeout=90, what=f"the pushed turn; screen: {tui.screen[-400:]!r}")
        assert w.model.seen(first) == pushes()[:1], (w.model.seen(first), pushes(), w.h.hook_log())
        wait_until(lambda: idle() and w.h.query("SELECT count(*) FROM message")[0][0] == 4, timeout=60)
        assert [e["text"] for e in w.gw.peek_system_events(key)] == [first]  # a push acknowledges nothing
        second = change(others[1])
        wait_until(lambda: w.model.seen(second), timeout=90, what="the second push's turn")
        wait_until(lambda: turns_over() == 3 and idle(), timeout=60, what="the second pushed turn over")
        tui.type("anything else?")
        wait_until(lambda: w.model.seen("anything else?"), timeout=60, what="the person's next prompt")
        wait_until(lambda: idle() and not w.gw.peek_system_events(key), timeout=60, what="acknowledged")
    assert len(w.model.seen(first)) == 1 and len(w.model.seen(second)) == 1, (w.model.seen(first), w.model.seen(second))
    assert len(pushes()) == 2, pushes()  # one push per notice, none for a notice already given
    assert w.stored(first) == 0 and w.stored(second) == 0  # the notices themselves are stored nowhere
    records = [json.loads(line) for line in sources.path_for(w.h.db_path, sid).read_text().splitlines()]
    assert [r["source"] for r in records if r["why"] == "sessionwatch's push"] == ["program", "program"], records
    assert w.gw.watch(MANAGER, key)
    assert w.gw.upstream_tick()["links"][0]["status"] == "recorded"
    (human,) = w.events(key, "human_direct_message")
    assert human["payload"]["turns"] == 2, human  # the person's two prompts; neither push is a person's
