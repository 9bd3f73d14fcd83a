"""Pi (the real binary, pinned) with sessionwatch: its extension and its session files.

- With the extension (``sessionwatch install pi``): a pending notice reaches the model's next request
  exactly once and is not stored in the session file; the lifecycle goes working, idle, ended; a person
  typing in the TUI is recorded as ``human_direct_message`` while the same text sent by ``pi -p`` is not.
- Without it, from the file alone: a removed session file is ``upstream_missing`` after three misses.

Each test keeps its host runs few: the machine is shared.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.engine.tools import TOOLS
from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply
from tests.support.hosts import pi
from tests.support.pi_host import PiHome, clean_env
from tests.support.tui import Tui
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

MANAGER, WORKER = "agent:main:main", "agent:main:worker"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with FakeModel("chat", default="noted") as model:
        h = PiHome(tmp_path, pi(), model.url)
        store = f"sqlite:///{tmp_path / 'sw.db'}"
        h.extra_env = {"XDG_STATE_HOME": str(tmp_path / "state"), "SESSIONWATCH_STORE": store}
        gw = Gateway.open(store, timers=False)
        gw.upstream.configure(pi_root=h.agent)
        gw.put_session(MANAGER)
        gw.put_session(WORKER)
        try:
            yield {"h": h, "gw": gw, "model": model, "store": store}
        finally:
            gw.close()


def _sessionwatch(h: PiHome, *args: str) -> dict[str, Any]:
    """The CLI in the project, as a person runs it there; the store is the environment's (the extension's
    hook finds it in Pi's environment), so --project files name none."""
    env = {**clean_env(), **h.env()}
    if args[0] in ("install", "uninstall"):
        env.pop("SESSIONWATCH_STORE")
    out = subprocess.run(
        [*SESSIONWATCH, "--json", *args], cwd=h.project, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout) if out.stdout.strip() else {}


def _events(gw: Gateway, key: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in gw.changes_since(key, 0).to_json()["events"] if e["kind"] == kind]


def _states(gw: Gateway, key: str) -> list[str]:
    """The lifecycle states the session went through, in order."""
    kinds = ("session_working", "session_waiting", "session_idle", "session_ended")
    return [e["kind"][8:] for e in gw.changes_since(key, 0).to_json()["events"] if e["kind"] in kinds]


def test_a_notice_reaches_the_next_model_call_once_and_the_lifecycle_is_reported(world: dict[str, Any]) -> None:
    h, gw, model = world["h"], world["gw"], world["model"]
    installed = _sessionwatch(h, "install", "pi", "--session", WORKER, "--verify")
    assert [c["action"] for c in installed["changes"]] == ["created"]
    assert installed["verify"]["ok"], installed["verify"]
    extension = h.project / ".pi" / "extensions" / "sessionwatch.ts"
    assert "machine" not in extension.read_text() and str(h.root) not in extension.read_text()  # committed
    # something changed in a session the worker watches: one notice queued for the worker
    gw.put_session("agent:main:other")
    gw.watch(WORKER, "agent:main:other")
    gw.inbound("agent:main:other", "ship it on Friday", channel="slack")
    pending = gw.peek_system_events(WORKER)
    assert len(pending) == 1
    notice = pending[0]["text"]

    first = h.prompt("what is new?")
    assert first.returncode == 0, first.stderr[-2000:]
    second = h.prompt("and now?", "-c")
    assert second.returncode == 0, second.stderr[-2000:]

    assert model.seen(notice) == [0]  # in the first request only: delivered once
    system = model.requests[0]["messages"][0]
    assert system["role"] == "system" and notice in system["content"]
    (session_file,) = h.session_files()
    assert notice not in session_file.read_text()  # never stored in the session
    assert gw.peek_system_events(WORKER) == []  # acknowledged by the next run
    states = _states(gw, WORKER)
    assert states[:3] == ["idle", "working", "idle"] and states[-1] == "ended", states
    # a `pi -p` prompt is a program's: never a person's message
    assert _events(gw, WORKER, "human_direct_message") == []

    doctor = _sessionwatch(h, "doctor", "pi")
    (project,) = [s for s in doctor["hosts"][0]["scopes"] if s["scope"] == "project"]
    assert project["ok"], project
    removed = _sessionwatch(h, "uninstall", "pi")
    assert [c["action"] for c in removed["changes"]] == ["removed"]
    assert not (h.project / ".pi").exists()


def test_a_person_typing_in_the_tui_is_recorded_and_the_same_text_from_pi_p_is_not(world: dict[str, Any]) -> None:
    import time
    from datetime import datetime

    h, gw, model = world["h"], world["gw"], world["model"]
    _sessionwatch(h, "install", "pi")  # each Pi session its own key: agent:<folder>:pi:<session id>
    with Tui(h, *h.tui_args()) as tui:
        wait_until(lambda: tui.screen.strip(), timeout=60, what="the TUI up")
        tui.type("please look at the failing test")
        wait_until(lambda: model.seen("please look at the failing test"), timeout=60, what="the prompt at the model")
        (session_file,) = wait_until(h.session_files, timeout=30, what="the session file")
        sid = json.loads(session_file.read_text().splitlines()[0])["id"]
        key = f"agent:project:pi:{sid}"
        wait_until(lambda: gw.link(key), timeout=30, what="the session adopted by the extension")
        assert gw.watch(MANAGER, key)
        typed_at = int(time.time() * 1000)
        tui.type("stop, ship it on Friday instead")
        events = wait_until(
            lambda: _events(gw, key, "human_direct_message"), timeout=30, what="the person's prompt recorded"
        )
        assert [e["actorType"] for e in events] == ["human"]
        wait_until(lambda: len(model.requests) >= 2, timeout=30, what="the second prompt at the model")
        entry = wait_until(
            lambda: [
                e
                for e in map(json.loads, session_file.read_text().splitlines())
                if e.get("type") == "message" and "Friday" in json.dumps(e.get("message", {}).get("content"))
            ],
            timeout=30,
            what="the prompt in the session file",
        )[0]
    # recorded with the prompt's own time: as the person pressed Enter, before Pi wrote the prompt down (the
    # extension's run is what Pi waits for before it appends the prompt), not when a monitor found it
    written = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
    assert typed_at <= events[0]["occurredAt"] <= written, (typed_at, events[0], entry)
    # the same text sent by a program (pi -p in the same session, as a sessionwatch-launched run does)
    run = h.prompt("stop, ship it on Friday instead", "--session", str(session_file))
    assert run.returncode == 0, run.stderr[-2000:]
    gw.upstream_tick()  # and the file, read by the monitor, counts neither prompt again
    assert len(_events(gw, key, "human_direct_message")) == 1
    assert len(gw.peek_system_events(MANAGER)) == 1  # the manager is told once


def test_a_removed_session_file_is_upstream_missing_after_three_misses(world: dict[str, Any]) -> None:
    h, gw = world["h"], world["gw"]
    run = h.prompt("hello")  # no extension: the file alone
    assert run.returncode == 0, run.stderr[-2000:]
    (session_file,) = h.session_files()
    sid = json.loads(session_file.read_text().splitlines()[0])["id"]
    assert gw.continue_thread("pi", sid, session_key=WORKER)["linked"]
    assert gw.watch(MANAGER, WORKER)
    again = h.prompt("from outside", "--session", str(session_file))
    assert again.returncode == 0, again.stderr[-2000:]
    assert gw.upstream_tick()["links"][0]["status"] == "recorded"  # a prompt nobody here sent: a person's
    session_file.unlink()
    statuses = [gw.upstream_tick()["links"][0]["status"] for _ in range(3)]
    assert statuses == ["missing", "missing", "removed"], statuses
    assert len(_events(gw, WORKER, "upstream_missing")) == 1
    assert gw.link(WORKER) is None


def test_through_a_gateway_the_extension_delivers_once_and_a_gateway_gone_never_breaks_pi(tmp_path: Path) -> None:
    """Installed ``--user`` with ``--gateway``: the extension's hook runs post to the gateway (no local
    store), each Pi session is made there under its own key, a notice reaches the next request once; with
    the gateway gone, Pi answers all the same and the notice waits."""
    import os
    import time

    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    token = "tok-" + "6" * 28
    with FakeModel("chat", default="noted") as model:
        h = PiHome(tmp_path, pi(), model.url)
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
            h.extra_env = {"XDG_STATE_HOME": str(tmp_path / "state"), "SESSIONWATCH_TOKEN": token}
            env = {**clean_env(), **h.env()}
            out = subprocess.run(
                [*SESSIONWATCH, "--json", "--gateway", url, "install", "pi", "--user"],
                cwd=h.project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            installed = [Path(c["path"]) for c in json.loads(out.stdout)["changes"]]
            assert installed and all(h.project not in p.parents for p in installed)  # the agent dir
            assert all(token not in p.read_text() for p in installed)

            first = h.prompt("set up the project")
            assert first.returncode == 0, first.stderr[-2000:]
            (session_file,) = h.session_files()
            sid = json.loads(session_file.read_text().splitlines()[0])["id"]
            key = f"agent:project:pi:{sid}"  # --user: the agent is the folder the session runs in
            with Gateway.open(store, timers=False) as gw:
                assert gw.get_session(key) is not None
                gw.put_session(WORKER)
                assert gw.watch(key, WORKER)
                gw.inbound(WORKER, "rotate the keys first", channel="slack")
                notice = gw.peek_system_events(key)[0]["text"]
            before = len(model.requests)
            reconcile = Reply.call("session_status", {"sessionKey": WORKER, "changesSince": 0})
            model.script(reconcile, Reply.say("reconciled"))  # the tool runs through the gateway too
            again = h.prompt("carry on", "--session", str(session_file))
            assert again.returncode == 0, again.stderr[-2000:]
            assert [i - before for i in model.seen(notice)] == [0, 1]  # the run's system prompt, both calls
            assert len(_delta_results(model)) == 1, h.hook_log()
            with Gateway.open(store, timers=False) as gw:
                assert gw.peek_system_events(key) == []  # reconciled

            with Gateway.open(store, timers=False) as gw:
                gw.inbound(WORKER, "and the certificates", channel="slack")
            stop(server)  # gone: Pi answers all the same (a tool call is an error the model reads), the notice waits
            model.script(Reply.call("sessions_list", {}))
            begun = time.monotonic()
            last = h.prompt("anything else?", "--session", str(session_file))
            assert last.returncode == 0 and "noted" in last.stdout, last.stderr[-2000:]
            assert time.monotonic() - begun < 60
            failed = model.tool_results(model.requests[-1])[-1]  # this call's (the conversation holds the earlier)
            assert "sessionwatch sessions_list failed (unavailable" in failed, failed
            with Gateway.open(store, timers=False) as gw:
                assert len(gw.peek_system_events(key)) == 1  # nothing lost
        finally:
            stop(server)


def _delta_results(model: FakeModel) -> list[str]:
    """The tool results that carry a session's changes (a reconcile's answer)."""
    results = [r for req in model.requests for r in model.tool_results(req)]
    return [r for r in results if "human_direct_message" in r and "stateChanges" in r]


def test_the_tools_are_in_the_first_request_and_a_reconcile_call_returns_the_delta_once(
    world: dict[str, Any],
) -> None:
    """Pi has no MCP: the extension registers the six tools, so they are in the first model request; a
    scripted ``session_status`` with ``changesSince`` runs as the session's own key (``sessionwatch tool
    --host pi``), returns the delta once and reconciles: the notice the run got never comes again."""
    h, gw, model = world["h"], world["gw"], world["model"]
    _sessionwatch(h, "install", "pi")  # each Pi session its own key
    first = h.prompt("set up the project")
    assert first.returncode == 0, first.stderr[-2000:]
    assert set(model.tool_names(model.requests[0])) >= set(TOOLS), model.tool_names(model.requests[0])
    status = next(t["function"] for t in model.requests[0]["tools"] if t["function"]["name"] == "session_status")
    assert "changesSince" in json.dumps(status["parameters"])
    (session_file,) = h.session_files()
    key = f"agent:project:pi:{_session_id(session_file)}"

    gw.put_session("agent:main:other")
    assert gw.watch(key, "agent:main:other")
    gw.inbound("agent:main:other", "ship it on Friday", channel="slack")
    (notice,) = [e["line"] for e in gw.peek_system_events(key)]
    model.script(
        Reply.call("session_status", {"sessionKey": "agent:main:other", "changesSince": 0}), Reply.say("reconciled")
    )
    before = len(model.requests)
    run = h.prompt("what changed?", "--session", str(session_file))
    assert run.returncode == 0, run.stderr[-2000:]
    # given to the run's first call, in the system prompt Pi keeps for each call of that run
    assert model.seen(notice) == list(range(before, len(model.requests))), (model.seen(notice), h.hook_log())
    (delta,) = _delta_results(model)
    assert delta.count('"stateChanges"') == 1 and notice not in delta, delta
    assert gw.peek_system_events(key) == []  # reconciled
    assert _own_keys(gw) == [key]  # the call ran as the session's own key
    later = len(model.requests)
    run = h.prompt("and now?", "--session", str(session_file))
    assert run.returncode == 0, run.stderr[-2000:]
    assert model.seen(notice)[-1] < later  # never again


def _own_keys(gw: Gateway, prefix: str = "agent:project:pi:") -> list[str]:
    rows = gw.call_tool("sessions_list", {"limit": 100}, caller=MANAGER)["sessions"]
    return sorted(s["sessionKey"] for s in rows if s["sessionKey"].startswith(prefix))


def _session_id(path: Path) -> str:
    return str(json.loads(path.read_text().splitlines()[0])["id"])


def test_two_sessions_in_one_folder_get_two_keys_and_a_continued_one_keeps_its_own(world: dict[str, Any]) -> None:
    h, gw = world["h"], world["gw"]
    _sessionwatch(h, "install", "pi")  # no --session: each Pi session its own key
    for prompt in ("first", "second"):
        run = h.prompt(prompt)
        assert run.returncode == 0, run.stderr[-2000:]
    files = h.session_files()
    assert len(files) == 2, files
    expected = sorted(f"agent:project:pi:{_session_id(f)}" for f in files)
    assert _own_keys(gw) == expected, h.hook_log()
    for key in expected:  # adopted: a person typing into it later is detected
        link = gw.link(key)
        assert link is not None and link["threadId"] == key.rsplit(":", 1)[1], h.hook_log()
    again = h.prompt("third", "--session", str(files[0]))
    assert again.returncode == 0, again.stderr[-2000:]
    assert _own_keys(gw) == expected  # the continued session is the same key, no third one


def test_a_change_during_a_tool_loop_reaches_the_same_turn(world: dict[str, Any]) -> None:
    """Pi's ``context`` event runs before every model call: a change that lands while a tool runs reaches
    the call after the tool, in the same turn, once, and is never stored in the session file."""
    h, gw, model = world["h"], world["gw"], world["model"]
    _sessionwatch(h, "install", "pi", "--session", WORKER)
    gw.put_session("agent:main:other")
    assert gw.watch(WORKER, "agent:main:other")
    (h.project / "notes.txt").write_text("the brief is due on Friday\n")
    notice: list[str] = []

    def change() -> None:  # a person writes into the watched session while Pi runs the tool
        gw.inbound("agent:main:other", "use the 2024 brief", channel="slack")
        notice.append(gw.peek_system_events(WORKER)[-1]["text"])

    model.script(Reply.call("read", {"path": "notes.txt"}, before=change), Reply.say("done reading"))
    run = h.prompt("read notes.txt")
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(model.requests) == 2 and model.tool_results(model.requests[1]), model.requests[-1:]
    assert notice and model.seen(notice[0]) == [1], h.hook_log()  # the call after the tool, only
    (session_file,) = h.session_files()
    assert notice[0] not in session_file.read_text()  # never stored
    again = h.prompt("and now?", "--session", str(session_file))
    assert again.returncode == 0, again.stderr[-2000:]
    assert model.seen(notice[0]) == [1]  # once
    assert gw.peek_system_events(WORKER) == []  # acknowledged by the next run


def test_a_pi_killed_while_working_is_lost_and_its_parent_told_once(world: dict[str, Any]) -> None:
    """A worker spawned by the manager runs in Pi; Pi is killed (kill -9) in the middle of a turn. The
    extension's reports carry Pi's own pid; with nothing heard for the configured time and that process
    gone, the gateway's timer makes the worker lost and the manager is told once."""
    import os
    import signal
    import subprocess
    import time

    from tests.hosts.lost_timer import LOST_AFTER_MS, HangingTurn, lost_timer

    h, gw, model, store = world["h"], world["gw"], world["model"], world["store"]
    worker = "agent:main:subagent:worker"
    assert "error" not in gw.call_tool("sessions_spawn", {"sessionKey": worker}, caller=MANAGER)
    _sessionwatch(h, "install", "pi", "--session", worker)
    h.extra_env["SESSIONWATCH_LOST_AFTER_MS"] = str(LOST_AFTER_MS)
    with lost_timer(store, h.env()), HangingTurn(model) as turn:
        proc = subprocess.Popen(
            [str(h.binary), *h.tui_args(), "-p", "long job"],
            cwd=h.project,
            env=h.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            assert turn.started.wait(120), "the turn never reached the model"

            def lifecycle() -> Any:
                return gw.store.get_lifecycle(worker, "main")

            wait_until(lambda: lifecycle() is not None and lifecycle().state == "working", timeout=30)
            assert lifecycle().pid == proc.pid  # the host process, not the hook's
            time.sleep(LOST_AFTER_MS * 3 / 1000)  # quiet for longer than the limit, but its process runs
            assert lifecycle().state == "working"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            wait_until(lambda: lifecycle().state == "lost", timeout=60, what="the worker lost")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    kinds = [e["kind"] for e in gw.changes_since(worker, 0).to_json()["events"]]
    assert kinds.count("session_lost") == 1 and kinds[-1] == "session_lost", kinds
    notices = gw.peek_system_events(MANAGER)
    assert len(notices) == 1 and worker in notices[0]["line"], notices
    listed = gw.call_tool("sessions_list", {"lifecycle": "lost"}, caller=MANAGER)["sessions"]
    assert [s["sessionKey"] for s in listed] == [worker]


def test_install_with_dir_and_agent_names_each_session_after_that_agent(world: dict[str, Any], tmp_path: Path) -> None:
    """``install pi --dir FOLDER --agent NAME`` from anywhere: the extension lands in FOLDER's ``.pi``, and
    each Pi session run there is ``agent:NAME:pi:<session id>``."""
    h, gw = world["h"], world["gw"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**clean_env(), **h.env()}
    env.pop("SESSIONWATCH_STORE")
    out = subprocess.run(
        [*SESSIONWATCH, "--json", "install", "pi", "--dir", str(h.project), "--agent", "crew"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (change,) = json.loads(out.stdout)["changes"]
    assert Path(change["path"]) == h.project / ".pi" / "extensions" / "sessionwatch.ts"
    assert not (elsewhere / ".pi").exists()
    run = h.prompt("hello")
    assert run.returncode == 0, run.stderr[-2000:]
    (session_file,) = h.session_files()
    key = f"agent:crew:pi:{_session_id(session_file)}"
    assert gw.get_session(key, "crew") is not None, h.hook_log()
    assert _own_keys(gw, "agent:project:pi:") == []


def test_with_sessionwatch_missing_from_path_pi_answers_as_usual(world: dict[str, Any]) -> None:
    """The extension runs ``sessionwatch`` from PATH: when it is not there, every run fails to start, and
    Pi still answers; what is pending for the session stays queued."""
    import os
    import shutil

    h, gw, model = world["h"], world["gw"], world["model"]
    _sessionwatch(h, "install", "pi", "--session", WORKER)
    gw.put_session("agent:main:other")
    assert gw.watch(WORKER, "agent:main:other")
    gw.inbound("agent:main:other", "ship it on Friday", channel="slack")
    h.extra_env["PATH"] = os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "sessionwatch").exists()
    )
    assert shutil.which("sessionwatch", path=h.env()["PATH"]) is None and shutil.which("node", path=h.env()["PATH"])
    model.script(Reply.call("sessions_list", {}))  # the model calls a sessionwatch tool: an error it reads
    run = h.prompt("what is new?")
    assert run.returncode == 0 and "noted" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    assert model.seen("what is new?") == [0, 1]
    (failed,) = model.tool_results(model.requests[1])
    assert "sessionwatch is not installed where Pi runs" in failed, failed
    assert len(gw.peek_system_events(WORKER)) == 1  # nothing consumed


def test_an_idle_tui_session_is_pushed_once_per_notice_and_the_turn_gets_the_notice(world: dict[str, Any]) -> None:
    """In the TUI, the extension watches the session's notices (``sessionwatch mcp``, its notices resource):
    a notice that comes while the session is idle starts a turn with one short message, and that turn's
    model call gets the notice. One push per notice; the push acknowledges nothing (the next prompt's run
    does), and a notice the session was given already is never pushed again."""
    h, gw, model = world["h"], world["gw"], world["model"]
    _sessionwatch(h, "install", "pi")  # each Pi session its own key: the watcher derives it the same way
    others = ("agent:main:other", "agent:main:another")
    for other in others:
        gw.put_session(other)

    def change(other: str) -> str:  # a person writes into a session the Pi session watches
        gw.inbound(other, "use the 2024 brief", channel="slack")
        return str(next(e["text"] for e in gw.peek_system_events(key) if other in e["text"]))

    def idle() -> bool:
        return (gw.lifecycle_of(key, "project") or {}).get("state") == "idle"

    def turns_over() -> int:  # a session can be idle before its first turn starts: count working, then idle
        kinds = [e["kind"] for e in gw.changes_since(key, 0).to_json()["events"]]
        kinds = [k for k in kinds if k in ("session_working", "session_idle")]
        return sum(a == "session_working" and b == "session_idle" for a, b in itertools.pairwise(kinds))

    def pushes() -> list[int]:
        """The requests that brought a push message first (it stays in the conversation, as Pi stores it)."""
        counts = [sum(t.startswith("sessionwatch: ") for t in model.texts(r)) for r in model.requests]
        return [i for i, n in enumerate(counts) if n > (counts[i - 1] if i else 0)]

    with Tui(h, *h.tui_args()) as tui:
        wait_until(lambda: tui.screen.strip(), timeout=60, what="the TUI up")
        tui.type("hello")
        wait_until(lambda: model.seen("hello"), timeout=60, what="the prompt at the model")
        (session_file,) = wait_until(h.session_files, timeout=30, what="the session file")
        key = f"agent:project:pi:{_session_id(session_file)}"
        wait_until(lambda: turns_over() == 1 and idle(), timeout=30, what="the first turn over")
        for other in others:
            assert gw.watch(key, other)
        first = change(others[0])
        wait_until(lambda: model.seen(first), timeout=60, what=f"the pushed turn; screen: {tui.screen[-400:]!r}")
        assert model.seen(first) == pushes()[:1], (model.seen(first), pushes())  # the push's turn got the notice
        wait_until(lambda: idle() and len(model.requests) == pushes()[0] + 1, timeout=30)
        assert [e["text"] for e in gw.peek_system_events(key)] == [first]  # a push acknowledges nothing
        second = change(others[1])
        wait_until(lambda: model.seen(second), timeout=60, what="the second push's turn")
        wait_until(lambda: turns_over() == 3 and idle(), timeout=30, what="the second pushed turn over")
        tui.type("anything else?")
        wait_until(lambda: model.seen("anything else?"), timeout=60, what="the person's next prompt")
        wait_until(lambda: idle() and not gw.peek_system_events(key), timeout=30, what="acknowledged")
    assert len(model.seen(first)) == 1 and len(model.seen(second)) == 1, (model.seen(first), model.seen(second))
    assert len(pushes()) == 2, pushes()  # one push per notice, none for a notice already given
    entries = [json.loads(line) for line in session_file.read_text().splitlines()]
    assert sum(e.get("customType") == "sessionwatch" for e in entries) == 2  # stored as Pi stores a custom message
    assert first not in session_file.read_text() and second not in session_file.read_text()  # never stored
    assert _events(gw, key, "human_direct_message") == []  # the pushes are no person's
