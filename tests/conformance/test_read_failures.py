"""A failed host read is an error, never an empty success; a tool whose read may degrade says so; a
recording the store refuses is counted (issue 8 item 5). The failure is real: another connection
renames a table under the running gateway, on both backends."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

import pytest

from sessionwatch import Gateway, Unavailable
from sessionwatch.testing.helpers import CHILD, MAIN, ok


@contextlib.contextmanager
def table_away(url: str, table: str) -> Iterator[None]:
    """Rename ``table`` from a second connection for the duration, then put it back."""

    def run(sql: str) -> None:
        if url.startswith("sqlite:"):
            with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)) as conn:
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute(sql)
        else:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql)

    run(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        yield
    finally:
        run(f"ALTER TABLE {table}_away RENAME TO {table}")


def _notice_pending(gw: Gateway) -> None:
    gw.inbound(CHILD, "stop, new brief", channel="webchat")
    assert len(gw.peek_system_events(MAIN)) == 1


@pytest.mark.parametrize(
    "table, read",
    [
        ("events", lambda gw: gw.events_after(0)),
        ("events", lambda gw: gw.changes_since(CHILD, 0)),
        ("heads", lambda gw: gw.state_version(CHILD)),
        ("cursors", lambda gw: gw.cursors()),
        ("cursors", lambda gw: gw.peek_system_events(MAIN)),
        ("cursors", lambda gw: gw.drain_system_events(MAIN)),
        ("sessions", lambda gw: gw.list_sessions()),
    ],
)
def test_a_failed_host_read_raises_unavailable(family: Gateway, store_url: str, table: str, read) -> None:
    _notice_pending(family)
    with table_away(store_url, table), pytest.raises(Unavailable) as info:
        read(family)
    assert info.value.code == "unavailable" and "failed" in info.value.message
    # the notice was neither lost nor consumed by the failed drain
    assert len(family.peek_system_events(MAIN)) == 1


def test_a_failed_drain_keeps_the_notice_for_the_next_one(family: Gateway, store_url: str) -> None:
    _notice_pending(family)
    with table_away(store_url, "system_events"), table_away(store_url, "cursors"), pytest.raises(Unavailable):
        family.drain_system_events(MAIN)
    assert [e["text"] for e in family.drain_system_events(MAIN)][0].startswith(f'Session "{CHILD}" changed')


def test_tools_say_when_a_read_degraded(family: Gateway, store_url: str) -> None:
    family.inbound(CHILD, "a person typed", channel="webchat")
    fine = ok(family.call_tool("session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN))
    assert "degraded" not in fine and fine["stateChanges"]["events"]
    with table_away(store_url, "events"):
        out = ok(family.call_tool("session_status", {"sessionKey": CHILD, "changesSince": 0}, caller=MAIN))
    assert out["degraded"] is True and out["stateChanges"]["events"] == []
    assert "Degraded" in out["text"] and "state changes" in out["text"] and "no changes" in out["text"]
    with table_away(store_url, "heads"):
        listed = ok(family.call_tool("sessions_list", {}, caller=MAIN))
        status = ok(family.call_tool("session_status", {"sessionKey": CHILD}, caller=MAIN))
    assert listed["degraded"] is True and {s["sessionKey"] for s in listed["sessions"]} == {MAIN, CHILD}
    assert status["degraded"] is True and status["stateVersion"] == 0 and "stateVersion" in status["text"]
    with table_away(store_url, "messages"):
        history = ok(family.call_tool("sessions_history", {"sessionKey": CHILD}, caller=MAIN))
    assert history["degraded"] is True and history["messages"] == []
    # a tool that cannot read what it needs at all is an error, not an empty answer
    with table_away(store_url, "sessions"):
        assert family.call_tool("sessions_list", {}, caller=MAIN)["error"]["code"] == "unavailable"


def test_a_refused_recording_is_counted_and_the_action_goes_on(family: Gateway, store_url: str) -> None:
    assert family.dropped_recordings == {"total": 0, "byCause": {}}
    with table_away(store_url, "events"):
        out = family.inbound(CHILD, "typed while the log is unwritable", channel="webchat")
        goal = family.set_goal(CHILD, "create", objective="ship it")
    assert out["recorded"] is False and out["event"] is None
    assert goal["recorded"] is False and goal["goal"]["objective"] == "ship it"
    assert family.dropped_recordings["total"] == 2 and sum(family.dropped_recordings["byCause"].values()) == 2
    assert family.inbound(CHILD, "and again", channel="webchat")["recorded"] is True
    assert family.dropped_recordings["total"] == 2
