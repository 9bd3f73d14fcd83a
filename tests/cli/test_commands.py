"""The operator's day against a local store, through the installed command, with documented exit codes."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from sessionwatch import Gateway, notice_text
from sessionwatch.exitcodes import exit_code_for
from tests.support import pg
from tests.support.waiting import wait_until

from .conftest import SESSIONWATCH, Runner, clean_env

MAIN = "agent:main:main"
KID = "agent:main:subagent:kid"


def _manager_and_child(sw: Runner) -> None:
    assert sw("put", MAIN).code == 0
    assert sw("put", KID, "--spawned-by", MAIN).code == 0
    assert sw("watch", KID, "--as", MAIN).code == 0


def test_put_sessions_and_pending_notices(sw: Runner) -> None:
    created = sw("put", MAIN, "--json")
    assert created.code == 0 and created.json()["created"] is True and created.json()["kind"] == "main"
    assert sw("put", KID, "--spawned-by", MAIN).code == 0
    assert sw("watch", KID, "--as", MAIN, "--json").json() == {"watcher": MAIN, "target": KID, "watching": True}
    rec = sw("inbound", KID, "use the Q4 numbers", "--channel", "webchat", "--json").json()
    assert rec["recorded"] is True and rec["event"]["kind"] == "human_direct_message"

    rows = {r["sessionKey"]: r for r in sw("sessions", "--json").json()["sessions"]}
    assert rows[KID]["kind"] == "subagent" and rows[KID]["spawnedBy"] == MAIN and rows[KID]["stateVersion"] == 1
    assert rows[MAIN]["pending"] == 1 and rows[KID]["pending"] == 0

    table = sw("sessions")
    assert table.code == 0
    line = next(ln for ln in table.out.splitlines() if MAIN in ln and "subagent" not in ln)
    assert line.split("│")[-2].strip() == "1"  # the pending column


def test_status_pretty_and_json_with_changes(sw: Runner) -> None:
    _manager_and_child(sw)
    sw("inbound", KID, "first", "--channel", "webchat")
    sw("inbound", KID, "second", "--channel", "webchat")
    js = sw("status", KID, "--since", "1", "--json")
    assert js.code == 0, js
    body = js.json()
    assert body["sessionKey"] == KID and body["stateVersion"] == 2
    assert [e["sequence"] for e in body["stateChanges"]["events"]] == [2]
    pretty = sw("status", KID, "--since", "0")
    assert pretty.code == 0 and "human_direct_message" in pretty.out and "stateVersion" in pretty.out
    # Looking never moves a cursor: the notice is still pending afterwards.
    assert len(sw("drain", MAIN, "--json").json()["events"]) == 1


def test_drain_prints_the_notice_once(sw: Runner) -> None:
    _manager_and_child(sw)
    sw("inbound", KID, "hello", "--channel", "webchat")
    first = sw("drain", MAIN)
    assert first.code == 0
    assert first.out.startswith("System: [") and notice_text(KID, 0) in first.out
    assert sw("drain", MAIN, "--json").json() == {"sessionKey": MAIN, "events": []}


def test_send_watch_unwatch_and_cursors(sw: Runner, store: str) -> None:
    sw("put", MAIN)
    sw("put", KID)
    sent = sw("send", KID, "please summarize", "--as", MAIN, "--watch", "--json")
    assert sent.code == 0, sent
    assert sent.json()["status"] == "accepted" and sent.json()["watched"] is True
    cursors = sw("cursors", "--watcher", MAIN, "--json").json()["cursors"]
    assert [(c["watcher"], c["target"], c["provenance"]) for c in cursors] == [(MAIN, KID, "explicit")]
    assert sw("unwatch", KID, "--as", MAIN, "--json").json()["unwatched"] is True
    assert sw("cursors", "--json").json() == {"cursors": []}
    with Gateway.open(store, timers=False) as gw:
        msgs = gw.store.messages(KID, "main", 10)
    assert [m.text for m in msgs] == ["please summarize"]


def test_send_with_timeout_returns_the_reply(sw: Runner, store: str) -> None:

    sw("put", MAIN)
    sw("put", KID)

    def reply() -> None:
        with Gateway.open(store, timers=False) as gw:
            # Reply once the question has arrived (as the child session would).
            wait_until(lambda: gw.store.messages(KID, "main", 10), timeout=20, interval=0.05, what="the question")
            gw.append_message(KID, "assistant", "42 apples")

    t = threading.Thread(target=reply)
    t.start()
    out = sw("send", KID, "how many?", "--as", MAIN, "--timeout", "20", "--json")
    t.join()
    assert out.code == 0 and out.json()["status"] == "ok" and out.json()["reply"] == "42 apples"


@pytest.mark.slow
def test_prune_token_and_put_global(sw: Runner) -> None:
    pruned = sw("prune", "--json")
    assert pruned.code == 0 and pruned.json()["skipped"] is False
    tok = sw("token").out.strip()
    assert len(tok) >= 40 and tok != sw("token").out.strip()
    assert len(sw("token", "--json").json()["token"]) >= 40
    assert sw("put", "global").code == 2  # a bare global key needs its agent
    assert sw("put", "global", "--agent", "ops", "--json").json()["agentId"] == "ops"


@pytest.mark.slow
def test_error_exit_codes(sw: Runner, tmp_path: Path) -> None:
    sw("put", MAIN)
    missing = sw("status", "agent:main:nobody")
    assert missing.code == 3 and "not_found" in missing.err and missing.out == ""
    as_json = sw("status", "agent:main:nobody", "--json")
    assert as_json.code == 3 and as_json.json()["error"]["code"] == "not_found"
    malformed = sw("status", "agent::broken")
    assert malformed.code == 2 and "invalid_argument" in malformed.err
    assert sw("status", MAIN, "--since", "-1").code == 2
    assert sw("send", "agent:main:nobody", "hi", "--as", MAIN).code == 3
    assert sw("watch", "agent:main:nobody", "--as", MAIN).code == 3
    assert sw("inbound", MAIN, "x" * 10, "--channel", "c" * 300).code == 2
    assert sw("--store", "sqlite:////proc/forbidden/x.db", "sessions").code == 2  # no such folder: usage
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a SQLite database" * 100)
    assert sw("--store", f"sqlite:///{corrupt}", "sessions").code == 1  # cannot be opened: unavailable
    assert sw("link", MAIN).code == 3  # the session has no catalog link


def test_exit_code_mapping_is_stable() -> None:
    assert [
        exit_code_for(c)
        for c in (
            "invalid_argument",
            "payload_too_large",
            "not_found",
            "unknown_tool",
            "unauthorized",
            "forbidden",
            "conflict",
            "unavailable",
            "internal",
        )
    ] == [2, 2, 3, 3, 4, 4, 5, 1, 1]


def test_serve_refuses_a_public_interface_without_a_token(sw: Runner) -> None:
    r = sw("serve", "--host", "0.0.0.0", "--port", "0")
    assert r.code == 4 and "forbidden" in r.err, r


def test_servers_refuse_weak_tokens_and_take_token_files(sw: Runner, tmp_path) -> None:
    for weak in ("x", "   ", "two words but long enough"):
        r = sw("serve", "--host", "0.0.0.0", "--port", "0", "--token", weak)
        assert r.code == 4 and "weak token" in r.err, r
        r = sw("node", "--host", "0.0.0.0", "--port", "0", "--token", weak)
        assert r.code == 4 and "weak token" in r.err, r
    r = sw("node", "--port", "0")
    assert r.code == 2 and "needs a token" in r.err, r
    r = sw("serve", "--port", "0", "--token-file", str(tmp_path / "missing"))
    assert r.code == 2 and "token file" in r.err, r
    r = sw("serve", "--port", "0", "--allowed-host", "bad:host:name")
    assert r.code == 2 and "allowed hosts" in r.err, r


def test_mcp_http_refuses_a_public_interface_without_a_token(sw: Runner) -> None:
    r = sw("mcp", "--session", MAIN, "--transport", "http", "--host", "0.0.0.0", "--port", "0")
    assert r.code == 4 and "forbidden" in r.err, r


def test_the_same_commands_on_postgresql() -> None:
    if not pg.available():
        pytest.skip("PostgreSQL is not reachable")
    with pg.fresh_database() as url:

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*SESSIONWATCH, "--store", url, *args], capture_output=True, text=True, timeout=60, env=clean_env()
            )

        assert run("put", MAIN).returncode == 0
        assert run("put", KID, "--spawned-by", MAIN).returncode == 0
        assert run("inbound", KID, "hello", "--channel", "webchat").returncode == 0
        rows = {r["sessionKey"]: r for r in json.loads(run("sessions", "--json").stdout)["sessions"]}
        assert rows[MAIN]["pending"] == 1 and rows[KID]["stateVersion"] == 1
        assert run("status", "agent:main:nobody").returncode == 3
