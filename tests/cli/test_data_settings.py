"""One configuration for every process (issue 8 item 4): the data settings live in the store, every
process uses them, a conflicting value is a clear error, and read-only commands never prune."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.store.records import EventInput

from .conftest import Runner, clean_env

MAIN = "agent:main:main"
KID = "agent:main:subagent:kid"


def _fill(url: str, settings: Settings, count: int) -> int:
    """``count`` log-only events through the public API (a manual clock: the hourly prune runs once, first)."""
    with Gateway.open(url, clock=ManualClock(), settings=settings) as gw:
        gw.put_session(MAIN)
        first = None
        for i in range(count):
            out = gw.record(EventInput(MAIN, "main", "compacted", "system", "compacted", 0, dedupe_key=f"op-{i}"))
            assert out is not None and out.inserted
            first = first or out.event.sequence
        assert gw.state_version(MAIN) == first + count - 1
        return first


def _retained(url: str) -> tuple[int, bool]:
    """(oldest retained sequence, history gap) of MAIN, read from the file without opening a Gateway."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        oldest = conn.execute("SELECT min(sequence) FROM events WHERE session_key = ?", (MAIN,)).fetchone()[0]
        pruned = conn.execute("SELECT pruned_max_sequence FROM heads WHERE session_key = ?", (MAIN,)).fetchone()[0]
    return oldest, pruned > 0


@pytest.mark.slow
def test_read_only_sessions_keeps_a_log_above_the_default_cap(sw: Runner, store: str) -> None:
    # The reproduction: with SESSIONWATCH_MAX_EVENTS=200000 a `sessions` cut 50,100 events to 50,000.
    first = _fill(store, Settings(max_events=200_000), 50_100)
    res = sw("sessions", "--json", env=clean_env(SESSIONWATCH_STORE=store, SESSIONWATCH_MAX_EVENTS="200000"))
    assert res.code == 0, res
    assert res.json()["sessions"][0]["stateVersion"] == first + 50_099
    assert _retained(store) == (first, False)


def test_read_only_commands_never_prune_even_above_the_stored_cap(sw: Runner, store: str) -> None:
    first = _fill(store, Settings(max_events=100), 150)  # stored cap 100, the hourly prune not due yet
    for args in (["sessions"], ["status", MAIN, "--since", "0"], ["log"], ["cursors"], ["settings", "show"]):
        res = sw(*args, "--json")
        assert res.code == 0, res
        assert _retained(store) == (first, False), args
    # an explicit prune does apply the stored cap
    pruned = sw("prune", "--json")
    assert pruned.code == 0 and pruned.json()["rowsDeleted"] == 50
    assert _retained(store) == (first + 50, True)


def test_every_process_uses_the_stored_queue_cap(sw: Runner, store: str) -> None:
    assert sw("settings", "set", "--queue-cap", "3", "--json").json()["settings"]["queue_cap"] == {"old": 20, "new": 3}
    with Gateway.open(store, clock=ManualClock()) as gw:  # a Python process given no settings
        assert gw.settings.queue_cap == 3
        gw.put_session(MAIN)
        for i in range(5):
            gw.enqueue_system_event(MAIN, f"event {i}")
        assert len(gw.peek_system_events(MAIN)) == 3
    rows = sw("sessions", "--json").json()["sessions"]
    assert rows[0]["pending"] == 3  # the CLI sees the same three live entries, not five


def test_settings_set_shows_old_and_new_values(sw: Runner, store: str) -> None:
    out = sw("settings", "set", "--max-events", "200000", "--retention-days", "7")
    assert out.code == 0, out
    assert "max_events" in out.out and "50000" in out.out and "200000" in out.out and "7 days" in out.out
    shown = sw("settings", "show", "--json").json()["settings"]
    assert shown["max_events"]["value"] == 200_000 and shown["retention_ms"]["value"] == 7 * 86_400_000
    assert shown["queue_cap"]["value"] == 20
    bad = sw("settings", "set", "--max-events", "0")
    assert bad.code == 2 and ">= 1" in bad.err
    assert sw("settings", "set").code == 2


def test_a_conflicting_value_is_a_clear_error_and_changes_nothing(sw: Runner, store: str) -> None:
    assert sw("put", MAIN).code == 0  # the store is created with the default row cap, 50000
    env = clean_env(SESSIONWATCH_STORE=store, SESSIONWATCH_MAX_EVENTS="200000")
    res = sw("put", KID, env=env)
    assert res.code == 5, res
    assert "SESSIONWATCH_MAX_EVENTS=200000" in res.err and "50000" in res.err
    assert "sessionwatch settings set --max-events 200000" in res.err
    assert sw("status", KID).code == 3  # nothing was written
    # the gateway refuses to start the same way, naming both values
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionwatch.http",
            "--store",
            store,
            "--port",
            "0",
            "--no-monitor",
            "--log-level",
            "warning",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode != 0
    assert "SESSIONWATCH_MAX_EVENTS=200000" in proc.stderr and "settings set --max-events 200000" in proc.stderr
    # after the explicit change, the same environment is accepted
    assert sw("settings", "set", "--max-events", "200000").code == 0
    assert sw("put", KID, env=env).code == 0
