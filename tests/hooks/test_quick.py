"""The hook's quick answer (``hooks/quick.py``) never says "nothing to do" while something is pending.

It decides from the queue head alone (``appended <= drained``), so the property is held against the
store's own peek through random operations on a real SQLite store: whatever happened (notices from
watched children, plain system events, drains, acknowledgements by id, unwatching, sweeps), whenever the
quick check says nothing, the session's queue is empty. And the other way round where it matters for
speed: a quiet session is answered quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sessionwatch import Gateway
from sessionwatch.hooks import quick
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_the_quick_delivery_reads_the_queue_the_store_peeks(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    """The quick delivery's own query (a twin of the store's queue read: the chain of notice slots and the
    plain entries) gives the entries the engine's peek gives, in its order and worded the same, whatever
    happened to the queue (appends, drains, acknowledgements from the middle, unwatching, sweeps)."""
    from sessionwatch.hooks import quick_delivery

    folder = tmp_path_factory.mktemp("twin")
    store = f"sqlite:///{folder / 'sw.db'}"
    plan = quick.Plan(quick.DELIVER, path=str(folder / "sw.db"), key=MANAGER)
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        for child in CHILDREN:
            gw.put_session(child)
            gw.watch(MANAGER, child)
        for op, arg in ops:
            if op == "person":
                gw.inbound(arg, "a person\non two lines", channel="web")
            elif op == "enqueue":
                for i in range(1 + int(arg) % 3):
                    gw.enqueue_system_event(MANAGER, f"event {arg}.{i}\nsecond line")
            elif op == "drain":
                gw.drain_system_events(MANAGER)
            elif op == "ack_some":
                pending = gw.peek_system_events(MANAGER)
                gw.ack_system_events(MANAGER, [e["id"] for e in pending[int(arg) % 2 :: 2]])  # from the middle
            elif op == "unwatch":
                gw.unwatch(MANAGER, arg)
            elif op == "watch":
                gw.watch(MANAGER, arg)
            elif op == "sweep":
                gw.sweep()
            peeked = gw.peek_system_events(MANAGER)
            rows = quick_delivery.entries(plan)
            if len(peeked) >= 20:
                assert rows is None  # a full queue: the full run's
                continue
            assert rows is not None
            assert [r[1] for r in rows] == [e["id"] for e in peeked], op
            assert quick_delivery.rendered(rows) == [e["line"] for e in peeked], op


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
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
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
        # something to deliver: the quick delivery reads the queue, and leaves a turn's end to the full run
        assert decide({"hook_event_name": "Stop"}) == quick.DELIVER
        from sessionwatch.hooks import quick_delivery

        opts = {"host": "claude-code", "store": store, "session": MANAGER}
        stop = quick.plan(opts, json.dumps({"hook_event_name": "Stop"}).encode())
        assert quick_delivery.deliver(stop) is None


# -- the quick delivery (hooks/quick_delivery.py) ---------------------------------------------------------
class Stores:
    """One store and state folder the hook runs on, and a saved copy of both: each run starts from the
    copy, so the quick delivery and the full run see exactly the same store and answer state (the same
    store URL: the answer state is keyed by it)."""

    def __init__(self, tmp: Path) -> None:
        self.db, self.state = tmp / "sw.db", tmp / "state"
        self.saved_db, self.saved_state = tmp / "saved.db", tmp / "saved-state"
        self.url = f"sqlite:///{self.db}"
        with Gateway.open(self.url, timers=False) as gw:
            gw.put_session(MANAGER)
            gw.put_session("agent:main:subagent:a1")
            for child in [*CHILDREN, "agent:main:subagent:café"]:
                gw.put_session(child)
                gw.watch(MANAGER, child)
        self.save()

    @staticmethod
    def _copy(src_db: Path, src_state: Path, dst_db: Path, dst_state: Path) -> None:
        import shutil
        import sqlite3

        for stale in (dst_db, dst_db.with_name(dst_db.name + "-wal"), dst_db.with_name(dst_db.name + "-shm")):
            stale.unlink(missing_ok=True)
        with sqlite3.connect(src_db) as src, sqlite3.connect(dst_db) as dst:
            src.backup(dst)
        src.close()
        dst.close()
        shutil.rmtree(dst_state, ignore_errors=True)
        if src_state.exists():
            shutil.copytree(src_state, dst_state)

    def save(self) -> None:
        self._copy(self.db, self.state, self.saved_db, self.saved_state)

    def restore(self) -> None:
        self._copy(self.saved_db, self.saved_state, self.db, self.state)

    def change(self) -> Gateway:
        self.restore()
        return Gateway.open(self.url, timers=False, sweep=False)


def _full_run(stores: Stores, host: str, event: dict[str, object]) -> bytes:
    """The full run's answer: ``--log-level debug`` never takes the quick paths."""
    out = subprocess.run(
        [*SESSIONWATCH, "--store", stores.url, "--log-level", "debug", "hook", host, "--session", MANAGER],
        input=json.dumps(event).encode(),
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(stores.state)},
    )
    assert out.returncode == 0
    return out.stdout


def test_the_quick_delivery_prints_the_full_run_s_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Round by round on the same store and answer state: what the quick delivery prints is byte for byte
    what the full run prints, or it declines (and the full run answers). After each round the store goes
    on from the full run's result, so later rounds hold the answer the earlier one gave."""
    from sessionwatch.hooks import quick_delivery

    for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    stores = Stores(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(stores.state))
    tool = {**PROMPT, "tool_name": "Bash"}
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "go on"}

    def person(*children: str) -> object:
        return lambda gw: [gw.inbound(c, "a person", channel="web") for c in children]

    def enqueue(*texts: str, key: str = MANAGER) -> object:
        return lambda gw: [gw.enqueue_system_event(key, t) for t in texts]

    rounds: list[tuple[str, object, dict[str, object], str, bool]] = [
        ("a system event on two lines", enqueue("hello\nsecond line ✓ é"), tool, "claude-code", True),
        ("stale notices, the last answer held", person(CHILDREN[0], "agent:main:subagent:café"), prompt, "codex", True),
        ("nothing new: the held answer only", enqueue(), tool, "claude-code", True),
        ("a plain event and a notice", lambda gw: (enqueue("x")(gw), person(CHILDREN[1])(gw)), prompt, "codex", True),
        ("a held notice whose session changed again", person(CHILDREN[1]), tool, "claude-code", False),
        ("the notice queued again", enqueue(), tool, "claude-code", True),
        (
            "a subagent's own queue",
            enqueue("for a1", key="agent:main:subagent:a1"),
            {**tool, "agent_id": "a1"},
            "claude-code",
            True,
        ),
        ("a full queue", enqueue(*(f"n{i}" for i in range(20))), prompt, "claude-code", False),
        ("after a full queue", lambda gw: gw.drain_system_events(MANAGER), prompt, "claude-code", True),
        ("the end of a turn with a notice", enqueue("at the end"), {"hook_event_name": "Stop"}, "claude-code", False),
        (
            "a start with the answer held",
            enqueue(),
            {"hook_event_name": "SessionStart", "source": "resume"},
            "codex",
            True,
        ),
    ]
    quick_rounds = 0
    for what, change, event, host, quickly in rounds:
        gw = stores.change()
        change(gw)  # type: ignore[operator]
        gw.close()
        stores.save()
        raw = json.dumps({"session_id": "s", **event}).encode()
        opts = {"host": host, "store": stores.url, "session": MANAGER}
        found = quick.plan(opts, raw)
        assert found.verdict == quick.DELIVER, what
        capsys.readouterr()
        done = quick_delivery.deliver(found)
        printed = capsys.readouterr().out.encode()
        assert (done is not None) == quickly, what
        if done is None:
            assert printed == b"", what  # declined before printing anything
        stores.restore()
        full = _full_run(stores, host, {"session_id": "s", **event})
        if done is not None:
            assert printed == full, what
            quick_rounds += 1
            assert bool(done.printed) == bool(full), what
        stores.save()  # the next round goes on from the full run's result
    assert quick_rounds == 8


def test_the_quick_delivery_reads_the_schema_it_was_written_for() -> None:
    from importlib import resources

    from sessionwatch.hooks import quick_delivery

    names = [p.name for p in resources.files("sessionwatch.store").joinpath("migrations/sqlite").iterdir()]
    newest = max(int(n.split("_")[0]) for n in names if n.endswith(".sql"))
    assert newest == quick_delivery.SCHEMA, "a new migration: check quick_delivery.ENTRIES against it"


def _hook_runs_on(store: str) -> list[int]:
    """The processes running a hook on ``store`` (a detached run lives on after its hook has exited)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if store.encode() in cmdline and b"hook" in cmdline:
            found.append(int(pid))
    return found


def test_a_quick_delivery_is_acknowledged_only_by_a_later_run(tmp_path: Path) -> None:
    """At least once: the run that printed a notice never acknowledges it (the host may not have used the
    answer); its detached run acknowledges the answer before it, which the next run proves was taken."""
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    env = {"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state")}
    cmd = [*SESSIONWATCH, "--store", store, "hook", "claude-code", "--session", MANAGER, "--no-nudge"]
    prompt = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}).encode()
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        first = gw.enqueue_system_event(MANAGER, "first")["entry"]["id"]

    def run() -> bytes:
        out = subprocess.run(cmd, input=prompt, capture_output=True, timeout=60, env=env)
        assert out.returncode == 0
        return out.stdout

    def queued() -> list[int]:
        with Gateway.open(store, timers=False, sweep=False) as gw:
            return [e["id"] for e in gw.peek_system_events(MANAGER)]

    assert b"first" in run()
    # the detached run (it writes the prompt's lifecycle) has ended: the notice it never acknowledges
    wait_until(lambda: not _hook_runs_on(store), timeout=60, what="the detached run's end")
    assert queued() == [first]
    with Gateway.open(store, timers=False, sweep=False) as gw:
        second = gw.enqueue_system_event(MANAGER, "second")["entry"]["id"]
    out = run()
    assert b"second" in out and b"first" not in out  # the first is held: given once
    wait_until(lambda: queued() == [second], timeout=60, what="the first acknowledged by the second run's detached run")
    assert run() == b""  # the second is held
    wait_until(lambda: queued() == [], timeout=60, what="the second acknowledged")
    wait_until(lambda: not list((tmp_path / "state" / "sessionwatch" / "hooks").glob("*.json")), timeout=60)
    assert run() == b""
