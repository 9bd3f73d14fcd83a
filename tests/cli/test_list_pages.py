"""``sessionwatch sessions`` pages: --limit and --cursor show one page and say how to get the next; --all
walks every page."""

from __future__ import annotations

from sessionwatch.exitcodes import USAGE

from .conftest import Runner

KEYS = [f"agent:main:s{i}" for i in range(5)]


def test_pages_with_cursor_and_all(sw: Runner) -> None:
    for key in KEYS:
        assert sw("put", key).code == 0
    everything = [r["sessionKey"] for r in sw("sessions", "--json").json()["sessions"]]
    assert sorted(everything) == KEYS

    first = sw("sessions", "--limit", "2", "--json").json()
    assert [r["sessionKey"] for r in first["sessions"]] == everything[:2]
    human = sw("sessions", "--limit", "2")
    assert human.code == 0
    assert f"More sessions: sessionwatch sessions --limit 2 --cursor {first['nextCursor']}" in human.out
    second = sw("sessions", "--limit", "2", "--cursor", first["nextCursor"], "--json").json()
    assert [r["sessionKey"] for r in second["sessions"]] == everything[2:4]
    last = sw("sessions", "--limit", "2", "--cursor", second["nextCursor"], "--json").json()
    assert [r["sessionKey"] for r in last["sessions"]] == everything[4:] and "nextCursor" not in last
    assert "More sessions" not in sw("sessions", "--limit", "2", "--cursor", second["nextCursor"]).out

    walked = sw("sessions", "--all", "--limit", "2", "--json").json()
    assert [r["sessionKey"] for r in walked["sessions"]] == everything and "nextCursor" not in walked
    assert all("pending" in r for r in walked["sessions"])


def test_a_bad_cursor_is_a_usage_error(sw: Runner) -> None:
    assert sw("put", KEYS[0]).code == 0
    bad = sw("sessions", "--cursor", "bm90IGEgY3Vyc29y")
    assert bad.code == USAGE and "cursor" in bad.err
    other = sw("sessions", "--limit", "1", "--agent", "main", "--json")
    assert sw("put", KEYS[1]).code == 0
    token = sw("sessions", "--limit", "1", "--agent", "main", "--json").json()["nextCursor"]
    refused = sw("sessions", "--cursor", token)  # issued for --agent main, used without it
    assert refused.code == USAGE and "different agentId/kinds filter" in refused.err
    assert other.code == 0
