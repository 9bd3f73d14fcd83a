"""The hook's quick answer (``hooks/quick.py``) never says "nothing to do" while something is pending.

It decides from the queue head alone (``appended <= drained``), so the property is held against the
store's own peek through random operations on a real SQLite store: whatever happened (notices from
watched children, plain system events, drains, acknowledgements by id, unwatching, sweeps), whenever the
quick check says nothing, the session's queue is empty. And the other way round where it matters for
speed: a quiet session is answered quickly.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sessionwatch import Gateway
from sessionwatch.hooks import quick
from tests.support.commands import SESSIONWATCH

MANAGER = "agent:main:main"
CHILDREN = [f"agent:main:subagent:c{i}" for i in range(3)]
PROMPT = {"hook_event_name": "PostToolUse", "session_id": "s", "tool_name": "Read"}


def _quick(store: str, event: dict[str, object] | None = None) -> bool:
    raw = json.dumps(event or PROMPT).encode()
    return quick.nothing_to_do({"host": "claude-code", "store": store, "session": MANAGER}, raw)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("person"), st.sampled_from(CHILDREN)),
        st.tuples(st.just("enqueue"), st.integers(0, 40)),
        st.tuples(st.just("drain"), st.none()),
        st.tuples(st.just("ack_some"), st.integers(0, 3)),
        st.tuples(st.just("unwatch"), st.sampled_from(CHILDREN)),
        st.tuples(st.just("watch"), st.sampled_from(CHILDREN)),
        st.tuples(st.just("sweep"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_quick_says_nothing_only_when_the_queue_is_empty(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("quick")
    store = f"sqlite:///{folder / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        for child in CHILDREN:
            gw.put_session(child)
            gw.watch(MANAGER, child)
        assert _quick(store)
        for op, arg in ops:
            if op == "person":
                gw.inbound(arg, "a person", channel="web")
            elif op == "enqueue":
                for i in range(1 + int(arg) % 3):
                    gw.enqueue_system_event(MANAGER, f"event {arg}.{i}")
            elif op == "drain":
                gw.drain_system_events(MANAGER)
            elif op == "ack_some":
                pending = gw.peek_system_events(MANAGER)
                gw.ack_system_events(MANAGER, [e["id"] for e in pending[: int(arg)]])
            elif op == "unwatch":
                gw.unwatch(MANAGER, arg)
            elif op == "watch":
                gw.watch(MANAGER, arg)
            elif op == "sweep":
                gw.sweep()
            empty = gw.peek_system_events(MANAGER) == []
            if _quick(store):
                assert empty, f"quick said nothing to do after {op} with entries pending"


def test_the_decisions_that_need_no_store(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'none.db'}"
    assert _quick(store, {"hook_event_name": "PreCompact"})  # an event the hook neither answers nor writes down
    assert _quick(store, {**PROMPT, "agent_id": "a1"})  # from inside a subagent
    assert _quick(store, {"hook_event_name": "Stop", "stop_hook_active": True})  # no store: nothing to write
    assert not _quick(store, {"hook_event_name": "PermissionRequest"})  # a wait on a person: the full run
    assert _quick(store)  # no store file: the full run would find nothing (and creates none)
    assert not (tmp_path / "none.db").exists()
    assert not quick.nothing_to_do(
        {"host": "claude-code", "store": store}, json.dumps({**PROMPT, "session_id": 7}).encode()
    )
    assert not quick.nothing_to_do({"host": "claude-code", "store": store, "session": MANAGER}, b"{not json")
    gateway = {"host": "codex", "gateway": "http://127.0.0.1:9", "session": MANAGER}
    assert not quick.nothing_to_do(gateway, json.dumps(PROMPT).encode())


def test_a_prompt_in_a_store_with_adopted_threads_takes_the_full_run(tmp_path: Path) -> None:
    """The nudge of an adopted worker is the full run's: with links in the catalog, UserPromptSubmit is
    never settled quickly (other events still are)."""
    from tests.upstream.writers import ClaudeTranscript

    store = f"sqlite:///{tmp_path / 'sw.db'}"
    root = tmp_path / "claude"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        gw.upstream.configure(claude_root=root)
        worker = ClaudeTranscript(root)
        worker.assistant("ready")
        assert gw.continue_thread("claude", worker.session_id)["linked"]
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": worker.session_id, "prompt": "hi"}
    assert not _quick(store, prompt)
    assert _quick(store)


def test_without_a_key_the_thread_s_own_session_is_read_and_an_unknown_thread_takes_the_full_run(
    tmp_path: Path,
) -> None:
    """No --session: the session linked to the hook's thread is the one read (a subagent's events read
    the subagent's own key); a thread with no session yet takes the full run, which creates it."""
    from tests.upstream.writers import ClaudeTranscript

    store = f"sqlite:///{tmp_path / 'sw.db'}"
    root = tmp_path / "claude"
    worker = ClaudeTranscript(root)
    worker.assistant("ready")
    own = f"agent:proj:claude:{worker.session_id}"
    opts = {"host": "claude-code", "store": store, "agent": "proj"}
    tool = {**PROMPT, "session_id": worker.session_id}
    with Gateway.open(store, timers=False) as gw:
        gw.upstream.configure(claude_root=root)
        assert not quick.nothing_to_do(opts, json.dumps(tool).encode())  # not created yet: the full run
        assert gw.continue_thread("claude", worker.session_id, session_key=own)["linked"]
        assert quick.nothing_to_do(opts, json.dumps(tool).encode())
        gw.enqueue_system_event(own, "for the host session")
        assert not quick.nothing_to_do(opts, json.dumps(tool).encode())
        sub = {**tool, "agent_id": "a1"}
        assert quick.nothing_to_do(opts, json.dumps(sub).encode())  # the subagent's own queue is empty
        gw.put_session("agent:proj:subagent:a1")
        gw.enqueue_system_event("agent:proj:subagent:a1", "for the subagent")
        assert not quick.nothing_to_do(opts, json.dumps(sub).encode())
        assert not quick.nothing_to_do(opts, json.dumps({**sub, "hook_event_name": "SubagentStop"}).encode())


def test_a_quick_run_answers_nothing_and_exits_0(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
    out = subprocess.run(
        [*SESSIONWATCH, "--store", store, "hook", "claude-code", "--session", MANAGER, "--log-level", "info"],
        input=json.dumps(PROMPT).encode(),
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert (out.returncode, out.stdout) == (0, b"")
    with Gateway.open(store, timers=False) as gw:
        gw.enqueue_system_event(MANAGER, "now there is one")
    out = subprocess.run(
        [*SESSIONWATCH, "--store", store, "hook", "claude-code", "--session", MANAGER],
        input=json.dumps(PROMPT).encode(),
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert out.returncode == 0 and b"now there is one" in out.stdout  # the full run delivered it


def test_two_hook_runs_of_one_session_at_once_give_a_notice_once(tmp_path: Path) -> None:
    """A host may start two hooks of a session together (its start and the first prompt, or parallel
    tools): one of them gives the notice, the other sees it given. Through a gateway, where nothing else
    puts the two runs one after the other."""
    from tests.support.ports import listening_socket, spawn_serving, url_of
    from tests.support.procs import stop
    from tests.support.waiting import wait_http

    store = f"sqlite:///{tmp_path / 'sw.db'}"
    env = {"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state")}
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving([*SESSIONWATCH, "serve", "--store", store, "--no-monitor"], sock, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"{url}/v1/health", server, timeout=30)
        cmd = [*SESSIONWATCH, "--gateway", url, "hook", "claude-code", "--session", MANAGER]
        for round_ in range(10):
            with httpx.Client(base_url=url, timeout=10) as http:
                http.post(f"/v1/sessions/{MANAGER}/system-events", json={"text": f"notice {round_}"}).raise_for_status()
            procs = [
                subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                for _ in range(2)
            ]
            for p in procs:  # both get their input before either is read: they run side by side
                assert p.stdin is not None
                p.stdin.write(json.dumps(PROMPT).encode())
                p.stdin.close()
            outs = [p.stdout.read() if p.stdout else b"" for p in procs]
            for p in procs:
                p.wait(60)
            assert [p.returncode for p in procs] == [0, 0]
            assert sum(f"notice {round_}".encode() in o for o in outs) == 1, (round_, outs)
    finally:
        stop(server)


def test_a_tool_call_of_a_working_session_is_quick_unless_it_waited_or_was_heard_from_long_ago(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lifecycle: a tool call after a wait writes ``working``; one later than half the lost limit
    after the last word writes a heartbeat (the lost timer must not take a long busy turn for a silent
    one); others are quick."""
    import time

    monkeypatch.setenv("SESSIONWATCH_LOST_AFTER_MS", "2000")
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        assert _quick(store)  # never reported: nothing to write for a tool call
        gw.report_lifecycle(MANAGER, "waiting")
        assert not _quick(store)  # the person answered: working again
        gw.report_lifecycle(MANAGER, "working")
        assert _quick(store)
        time.sleep(1.2)  # past half the limit
        assert not _quick(store)  # the heartbeat is due
        gw.report_lifecycle(MANAGER, "working")  # what the full run writes
        assert _quick(store)

        def decide(event: dict[str, object]) -> str:
            opts = {"host": "claude-code", "store": store, "session": MANAGER}
            return quick.decide(opts, json.dumps(event).encode())

        # nothing to deliver, but the state to write: after the answer, in a detached run (cli/fast.py)
        assert decide({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}) == quick.WRITES
        assert decide({"hook_event_name": "Stop", "stop_hook_active": True}) == quick.WRITES
        assert decide({"hook_event_name": "SubagentStart", "agent_id": "a1"}) == quick.FULL  # before its stop
        gw.enqueue_system_event(MANAGER, "for the manager")
        assert decide({"hook_event_name": "Stop"}) == quick.FULL  # something to deliver: now
