"""The hook never fails its host (issue 19, item 6), run as the hosts run it: ``sessionwatch hook ...`` as
a subprocess with the host's JSON piped to stdin.

Whatever its arguments, environment or input it exits 0, prints nothing unless it delivers, and logs its
reason; it never creates a store; it reads at most 1 MiB of stdin and drops the rest without holding it;
it spends at most 2 s on a gateway that accepts and never answers, and later runs skip that gateway for
30 s without connecting, while the notice waits in the queue for the first run after.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support import pg
from tests.support.commands import SESSIONWATCH
from tests.support.hung_gateway import HungGateway
from tests.support.ports import spawn_serving
from tests.support.procs import stop
from tests.support.waiting import wait_http, wait_until

MANAGER = "agent:main:main"


def prompt(event: str = "UserPromptSubmit") -> dict[str, Any]:
    return {
        "session_id": "3f6c2a9e-0d4b-4d0e-9a57-7f1c2b3d4e5f",
        "transcript_path": "/home/dev/.claude/projects/-home-dev-app/3f6c2a9e.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": event,
        "prompt": "what is the status?",
    }


class Host:
    """Runs the hook as a host does: its own environment, stdin piped, stdout read, a log file."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.log = tmp / "hook.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
        self.env["XDG_STATE_HOME"] = str(tmp / "state")

    def run(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
        payload = json.dumps(prompt()).encode() if stdin is None else stdin
        res = subprocess.run(
            [*SESSIONWATCH, *args], input=payload, capture_output=True, env=env or self.env, timeout=120
        )
        return res.returncode, res.stdout.decode()

    def logged(self) -> str:
        return self.log.read_text(encoding="utf-8") if self.log.exists() else ""


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, Gateway]]:
    url = f"sqlite:///{tmp_path / 'sw.db'}"
    gw = Gateway.open(url, timers=False)
    gw.put_session(MANAGER)
    yield url, gw
    gw.close()


def context_of(out: str) -> str:
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"])


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["hook", "claude-code", "--bogus"], "unknown option '--bogus'"),
        (["hook", "claude-code", "--nudge-wait", "99999"], "--nudge-wait '99999'"),
        (["hook", "claude-code", "--nudge-wait=soon"], "--nudge-wait 'soon'"),
        (["--log-level", "loud", "hook", "claude-code"], "--log-level 'loud'"),
        (["--frobnicate", "hook", "claude-code"], "unknown option '--frobnicate'"),
        (["hook", "claude-code", "stray", "words"], "unexpected argument 'stray'"),
        (["hook", "claude-code", "--agent"], "--agent has no value"),
    ],
)
def test_a_command_line_it_does_not_understand_still_delivers_and_exits_0(
    host: Host, store: tuple[str, Gateway], args: list[str], reason: str
) -> None:
    url, gw = store
    gw.enqueue_system_event(MANAGER, "the release branch was cut")
    code, out = host.run("--store", url, *args, "--session", MANAGER, "--log-file", str(host.log))
    assert code == 0, host.logged()
    assert context_of(out).endswith("the release branch was cut")  # the rest of the line still counts
    assert reason in host.logged()


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["hook", "gemini"], "unknown host 'gemini'"),
        (["hook"], "no host given"),
        (["hook", "--session"], "no host given"),
    ],
)
def test_without_a_known_host_it_reads_its_input_answers_nothing_and_exits_0(
    host: Host, store: tuple[str, Gateway], args: list[str], reason: str
) -> None:
    url, gw = store
    gw.enqueue_system_event(MANAGER, "pending")
    code, out = host.run("--store", url, *args, "--log-file", str(host.log))
    assert (code, out) == (0, "")
    assert reason in host.logged()
    assert len(gw.peek_system_events(MANAGER)) == 1  # still queued for a run that can deliver it


def test_input_nested_too_deep_or_not_json_is_no_answer(host: Host, store: tuple[str, Gateway]) -> None:
    url, gw = store
    gw.enqueue_system_event(MANAGER, "pending")
    for raw in (b"[" * 200_000, b'{"a":' * 100_000, b"\xff\xfe not utf-8", b'{"hook_event_name": ["x"]}', b"null"):
        code, out = host.run(
            "--store", url, "hook", "codex", "--session", MANAGER, "--log-file", str(host.log), stdin=raw
        )
        assert (code, out) == (0, ""), raw[:20]
    assert "nested too deep" in host.logged()
    assert len(gw.peek_system_events(MANAGER)) == 1


# A parent that pipes SIZE bytes into the hook and reports what its only child cost: the peak RSS of the
# hook process alone (RUSAGE_CHILDREN of this small parent), and whether every byte was taken.
FEEDER = r"""
import json, resource, subprocess, sys
size = int(sys.argv[1])
proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
head = b'{"hook_event_name": "UserPromptSubmit", "prompt": "'
chunk = b"x" * (1 << 20)
sent, taken = 0, True
try:
    proc.stdin.write(head)
    sent = len(head)
    while sent < size:
        proc.stdin.write(chunk)
        sent += len(chunk)
    proc.stdin.close()
except BrokenPipeError:
    taken = False
out = proc.stdout.read()
code = proc.wait()
rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(json.dumps({"code": code, "stdout": out.decode(), "sent": sent, "taken": taken, "rss_kib": rss_kib}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in KiB on Linux only")
def test_a_200_mb_input_is_read_and_dropped_in_well_under_100_mb(host: Host, store: tuple[str, Gateway]) -> None:
    url, gw = store
    gw.enqueue_system_event(MANAGER, "pending")
    cmd = [*SESSIONWATCH, "--store", url, "hook", "claude-code", "--session", MANAGER, "--log-file", str(host.log)]
    res = subprocess.run(
        [sys.executable, "-c", FEEDER, str(200 << 20), *cmd], capture_output=True, env=host.env, timeout=300
    )
    report = json.loads(res.stdout)
    assert (report["code"], report["stdout"]) == (0, "")
    assert report["taken"] and report["sent"] >= 200 << 20  # the hook read it all: the host never blocks on it
    assert report["rss_kib"] < 100 * 1024, report
    assert "over the 1048576-byte limit" in host.logged()
    assert len(gw.peek_system_events(MANAGER)) == 1  # nothing delivered, nothing lost


def test_it_never_creates_a_sqlite_store(host: Host, tmp_path: Path) -> None:
    missing = tmp_path / "no-store.db"
    empty = tmp_path / "empty.db"
    empty.touch()
    default = tmp_path / "state" / "sessionwatch" / "sessionwatch.db"
    runs = [
        (["--store", f"sqlite:///{missing}"], host.env),
        (["--store", str(missing)], host.env),
        ([], {**host.env, "SESSIONWATCH_STORE": f"sqlite:///{missing}"}),
        ([], host.env),  # the default store, which does not exist yet
        (["--store", f"sqlite:///{empty}"], host.env),
    ]
    for args, env in runs:
        code, out = host.run(*args, "hook", "claude-code", "--session", MANAGER, "--log-file", str(host.log), env=env)
        assert (code, out) == (0, "")
    assert not missing.exists() and not default.exists()
    assert empty.stat().st_size == 0
    assert "never creates" in host.logged()


@pytest.mark.skipif(not pg.available(), reason="no PostgreSQL server at SESSIONWATCH_TEST_PG_ADMIN")
def test_it_never_creates_a_store_in_an_empty_postgresql_database(host: Host) -> None:
    import psycopg

    with pg.fresh_database(migrated=False) as url:
        code, out = host.run("--store", url, "hook", "codex", "--session", MANAGER, "--log-file", str(host.log))
        assert (code, out) == (0, "")
        with psycopg.connect(url) as conn:
            tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()
        assert tables == (0,)
        assert "holds no sessionwatch store" in host.logged()


def test_a_hung_gateway_costs_one_run_at_most_2_s_and_later_runs_skip_it_until_it_is_back(
    host: Host, store: tuple[str, Gateway]
) -> None:
    url, gw = store
    gw.enqueue_system_event(MANAGER, "the release branch was cut")
    hung = HungGateway()
    args = ["--gateway", hung.url, "hook", "claude-code", "--session", MANAGER, "--log-file", str(host.log)]

    missed_at = time.monotonic()
    code, out = host.run(*args)  # UserPromptSubmit: peek, link lookup, nudge; all on one budget
    took = time.monotonic() - missed_at
    assert (code, out) == (0, "")
    assert took < 3.5, took  # 2 s on the gateway; the rest is process start-up on a busy machine
    assert "no answer within the 2 s budget" in host.logged()
    tried = hung.accepted
    assert tried >= 1

    # Later runs (prompts and tool calls) skip it: no connection at all, answered at once.
    for event in ("PostToolUse", "UserPromptSubmit", "PostToolUse"):
        begun = time.monotonic()
        code, out = host.run(*args, stdin=json.dumps(prompt(event)).encode())
        assert (code, out) == (0, "")
        assert time.monotonic() - begun < 1.5
    assert hung.accepted == tried
    assert "remembered as down" in host.logged()

    # The gateway comes back on the same address; the notice waited and is delivered, once, after the 30 s.
    sock = hung.stop_answering_nothing()
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", url, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=host.env,
    )
    try:
        wait_http(f"{hung.url}/v1/health", server, timeout=30)
        assert len(gw.peek_system_events(MANAGER)) == 1

        def delivers() -> str:
            code, out = host.run(*args, "--no-nudge")
            assert code == 0
            return out

        out = wait_until(delivers, timeout=90, interval=1.0, what="a run after the gateway's 30 s as down")
        assert context_of(out).endswith("the release branch was cut")
        assert time.monotonic() - missed_at >= 29.0  # not one run in between asked the gateway
        code, out = host.run(*args, "--no-nudge")
        assert (code, out) == (0, "")  # acknowledged by this run: delivered once
        assert gw.peek_system_events(MANAGER) == []
    finally:
        stop(server)


def test_concurrent_runs_on_a_hung_gateway_each_keep_the_budget_and_share_one_mark(host: Host, tmp_path: Path) -> None:
    hung = HungGateway()
    args = ["--gateway", hung.url, "hook", "claude-code", "--session", MANAGER, "--no-nudge"]

    def batch() -> list[tuple[int, bytes, float]]:
        def one() -> tuple[int, bytes, float]:
            begun = time.monotonic()
            res = subprocess.run(
                [*SESSIONWATCH, *args],
                input=json.dumps(prompt()).encode(),
                capture_output=True,
                env=host.env,
                timeout=120,
            )
            return res.returncode, res.stdout, time.monotonic() - begun

        out: list[tuple[int, bytes, float]] = []
        threads = [threading.Thread(target=lambda: out.append(one())) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    first = batch()  # all miss at once, each within its own budget, each writing the mark
    assert [(code, out) for code, out, _ in first] == [(0, b"")] * 6
    assert max(took for _, _, took in first) < 6.0  # 2 s each, six processes starting on a busy machine
    marks = list((tmp_path / "state" / "sessionwatch" / "hooks").iterdir())
    assert len(marks) == 1 and marks[0].suffix == ".json", marks  # one mark, no half-written leftovers
    assert json.loads(marks[0].read_text())["reason"]
    tried = hung.accepted
    second = batch()
    assert [(code, out) for code, out, _ in second] == [(0, b"")] * 6
    assert hung.accepted == tried  # none of them connected


def test_an_unreachable_gateway_or_database_is_remembered_too(host: Host, tmp_path: Path) -> None:
    # a port nothing listens on: refused at once, remembered as well, so no run keeps knocking
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed before use: nothing listens there
    servers = [["--gateway", f"http://127.0.0.1:{port}"]]
    if importlib.util.find_spec("psycopg") is not None:
        servers.append(["--store", f"postgresql://postgres@127.0.0.1:{port}/sessionwatch"])
    for where in servers:
        args = [*where, "hook", "codex", "--session", MANAGER, "--log-file", str(host.log)]
        assert host.run(*args) == (0, "")
        assert host.logged().count("did not answer") >= 1
        before = host.logged().count("remembered as down")
        assert host.run(*args) == (0, "")
        assert host.logged().count("remembered as down") == before + 1


def test_a_run_against_a_gateway_remembered_as_down_is_settled_before_the_full_run_loads(
    host: Host, tmp_path: Path
) -> None:
    """Remembered as down: the run writes its log line and ends, without connecting, loading the full run
    or ``logging`` (what keeps such a run near Python's own start; the benchmark holds the number)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed before use: nothing listens there
    args = ["--gateway", f"http://127.0.0.1:{port}", "hook", "codex", "--session", MANAGER, "--log-file", str(host.log)]
    assert host.run(*args) == (0, "")  # the miss: remembered
    assert "did not answer" in host.logged()
    for event in ("PostToolUse", "SubagentStop"):  # one the hook answers, one it only writes down
        res = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "sessionwatch", *args],
            input=json.dumps(prompt(event)).encode(),
            capture_output=True,
            env=host.env,
            timeout=120,
        )
        assert (res.returncode, res.stdout) == (0, b"")
        loaded = {line.split("|")[-1].strip() for line in res.stderr.decode().splitlines() if "import time:" in line}
        assert not loaded & {"sessionwatch.hooks.run", "logging", "_socket", "socket"}, loaded
    lines = [line for line in host.logged().splitlines() if "remembered as down" in line]
    assert len(lines) == 2, host.logged()
    assert " WARNING sessionwatch.hook[" in lines[0] and "PostToolUse hook: no answer, the gateway at" in lines[0]
    assert "None hook: no answer" in lines[1]  # as the full run names an event it only writes down


@pytest.mark.parametrize(("setting", "spent"), [("0.5", 0.5), ("5", 5.0), ("lots", 2.0), ("0", 2.0), ("99", 2.0)])
def test_the_budget_on_a_hung_gateway_can_be_set(host: Host, tmp_path: Path, setting: str, spent: float) -> None:
    hung = HungGateway()
    args = ["--gateway", hung.url, "hook", "codex", "--session", MANAGER, "--log-file", str(host.log)]
    begun = time.monotonic()
    assert host.run(*args, env={**host.env, "SESSIONWATCH_HOOK_BUDGET": setting}) == (0, "")
    took = time.monotonic() - begun
    assert spent <= took < spent + 2.5, took  # the budget, then process start-up on a busy machine
    assert f"no answer within the {spent:g} s budget" in host.logged()
    hung.stop_answering_nothing().close()
