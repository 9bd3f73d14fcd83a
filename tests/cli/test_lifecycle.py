"""``sessionwatch lifecycle``, ``sessions --lifecycle`` and the states in ``top``, as a user runs them."""

from __future__ import annotations

from .conftest import Runner, clean_env

MAIN, KID, OTHER = "agent:cl:main", "agent:cl:subagent:kid", "agent:cl:other"


def _family(sw: Runner) -> None:
    assert sw("put", MAIN).code == 0
    assert sw("put", KID, "--spawned-by", MAIN).code == 0
    assert sw("watch", KID, "--as", MAIN).code == 0
    assert sw("put", OTHER).code == 0


def test_reports_change_the_state_and_an_end_tells_the_parent(sw: Runner) -> None:
    _family(sw)
    working = sw("lifecycle", KID, "working", "--pid", "4242", "--host", "claude", "--json")
    assert working.code == 0, working
    out = working.json()
    assert out["changed"] is True and out["lifecycle"]["state"] == "working"
    assert [e["kind"] for e in out["events"]] == ["session_working"]
    again = sw("lifecycle", KID, "working")
    assert again.code == 0 and f"{KID}: still working since" in again.out
    assert sw("drain", MAIN, "--json").json()["events"] == []  # a turn is nobody's news
    ended = sw("lifecycle", KID, "ended", "--outcome", "failed")
    assert ended.code == 0 and "ended (failed) since" in ended.out and "session_ended #" in ended.out
    drained = sw("drain", MAIN, "--json").json()["events"]
    assert len(drained) == 1 and drained[0]["text"].startswith(f'Session "{KID}" changed (other actor).')
    assert "Open:" not in drained[0]["text"]  # no public URL configured: v1's text


def test_the_public_url_links_the_notice_to_the_dashboard(sw: Runner, store: str) -> None:
    _family(sw)
    env = clean_env(SESSIONWATCH_STORE=store, SESSIONWATCH_PUBLIC_URL="https://example.test/sw/")
    assert sw("lifecycle", KID, "ended", env=env).code == 0
    text = sw("drain", MAIN, "--json", env=env).json()["events"][0]["text"]
    assert "Open: <https://example.test/sw/ui/#session/agent%3Acl%3Asubagent%3Akid>. Reconcile before acting" in text
    bad = sw("sessions", env=clean_env(SESSIONWATCH_STORE=store, SESSIONWATCH_PUBLIC_URL="ftp://x"))
    assert bad.code == 2 and "SESSIONWATCH_PUBLIC_URL" in bad.err


def test_bad_reports_are_usage_errors_and_unknown_sessions_not_found(sw: Runner) -> None:
    _family(sw)
    assert sw("lifecycle", KID, "lost").code == 2  # lost is the engine's to decide
    assert sw("lifecycle", KID, "working", "--outcome", "ok").code == 2
    assert sw("lifecycle", KID, "working", "--pid", "0").code == 2
    missing = sw("lifecycle", "agent:cl:nobody", "working")
    assert missing.code == 3, missing
    assert sw("sessions", "--json", "--lifecycle", "working").json()["sessions"] == []


def test_sessions_filters_and_top_shows_waiting_first(sw: Runner, store: str) -> None:
    _family(sw)
    assert sw("lifecycle", OTHER, "working").code == 0
    assert sw("lifecycle", KID, "waiting").code == 0
    listed = sw("sessions", "--json", "--lifecycle", "waiting").json()["sessions"]
    assert [(s["sessionKey"], s["lifecycle"]["state"]) for s in listed] == [(KID, "waiting")]
    both = sw("sessions", "--json", "--lifecycle", "waiting", "--lifecycle", "working").json()["sessions"]
    assert {s["sessionKey"] for s in both} == {KID, OTHER}
    table = sw("sessions", env=clean_env(SESSIONWATCH_STORE=store, COLUMNS="250"))
    assert "waiting since" in table.out and "working since" in table.out
    frame = sw("top", "--once", "--json").json()
    assert [(s["sessionKey"], s["state"]) for s in frame["sessions"]] == [(KID, "waiting"), (OTHER, "working")]
    assert frame["lifecycle"] == {"waiting": 1, "working": 1}
    plain = sw("top", "--once", env=clean_env(SESSIONWATCH_STORE=store, COLUMNS="250"))
    assert "Sessions by state (waiting first)" in plain.out and "1 waiting" in plain.out
    assert plain.out.index(KID) < plain.out.index(OTHER)
