"""Lifecycle over HTTP against a real gateway process: POST /v1/sessions/{key}/lifecycle (auth, scope,
validation), the Python clients, /metrics, the notice link, and ``lost`` for a real process killed with
``kill -9`` (the spawn parent told once)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import httpx
import pytest

from sessionwatch.client import AsyncGatewayClient, GatewayClient
from sessionwatch.errors import InvalidArgument, NotFound
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token
from tests.support.waiting import wait_until

from .test_metrics import scrape

MAIN, KID = "agent:lc:main", "agent:lc:subagent:kid"


def _family(http: httpx.Client, parent: str = MAIN, label: str = "kid") -> str:
    assert http.put(f"/v1/sessions/{parent}", json={}).status_code == 200
    out = http.post("/v1/tools/sessions_spawn", json={"label": label}, headers={"X-Session-Key": parent})
    assert out.status_code == 200, out.text
    return str(out.json()["sessionKey"])


def _notices(http: httpx.Client, key: str) -> list[str]:
    res = http.get(f"/v1/sessions/{key}/system-events")
    assert res.status_code == 200, res.text
    return [e["text"] for e in res.json()["entries"]]


def test_reports_over_http_change_state_and_an_end_tells_the_parent(http: httpx.Client) -> None:
    kid = _family(http)
    res = http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "working", "pid": 1234, "host": "claude"})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["changed"] is True and body["lifecycle"]["state"] == "working"
    assert [e["kind"] for e in body["events"]] == ["session_working"]
    again = http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "working"}).json()
    assert again["changed"] is False and again["events"] == []
    assert _notices(http, MAIN) == []
    status = http.post("/v1/tools/session_status", json={"sessionKey": kid}, headers={"X-Session-Key": MAIN}).json()
    assert status["lifecycle"]["state"] == "working"
    assert http.get(f"/v1/sessions/{kid}").json()["lifecycle"]["state"] == "working"
    ended = http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "ended", "outcome": "failed"}).json()
    assert [e["kind"] for e in ended["events"]] == ["session_ended"]
    (text,) = _notices(http, MAIN)
    assert text.startswith(f'Session "{kid}" changed (other actor). Reconcile before acting: ')
    listed = http.post("/v1/tools/sessions_list", json={"lifecycle": "ended"}, headers={"X-Session-Key": MAIN}).json()[
        "sessions"
    ]
    assert [(s["sessionKey"], s["lifecycle"]["outcome"]) for s in listed if s["agentId"] == "lc"] == [(kid, "failed")]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"state": "lost"},
        {"state": "sleeping"},
        {"state": "working", "pid": 0},
        {"state": "working", "pid": "12"},
        {"state": "working", "outcome": "ok"},
        {"state": "ended", "outcome": "boom"},
        {"state": "working", "host": ""},
        {"state": "working", "at": "now"},
        {"state": "working", "extra": 1},
    ],
)
def test_bad_bodies_are_400_and_change_nothing(http: httpx.Client, body: dict) -> None:
    kid = _family(http, "agent:lcbad:main")
    res = http.post(f"/v1/sessions/{kid}/lifecycle", json=body)
    assert res.status_code == 400, res.text
    assert res.json()["error"]["code"] == "invalid_argument"
    assert "lifecycle" not in http.get(f"/v1/sessions/{kid}").json()


def test_an_unknown_session_is_404(http: httpx.Client) -> None:
    res = http.post("/v1/sessions/agent:lc:nobody/lifecycle", json={"state": "working"})
    assert res.status_code == 404 and res.json()["error"]["code"] == "not_found"


def test_a_scoped_token_reports_only_its_agents_sessions(gateway_factory, tmp_path) -> None:
    store_url = f"sqlite:///{tmp_path}/scoped.db"
    store = open_store(store_url)
    token, _ = create_token(store, agents=["lc"], name="lc")
    store.close()
    gp = gateway_factory(store_url, token="admin-token-0123456789abcdef0123").start()
    admin = {"Authorization": f"Bearer {gp.token}"}
    with httpx.Client(base_url=gp.url, timeout=10, headers=admin) as http:
        _family(http)
        _family(http, "agent:other:main")
    scoped = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=gp.url, timeout=10, headers=scoped) as http:
        assert http.post(f"/v1/sessions/{KID}/lifecycle", json={"state": "idle"}).status_code == 200
        refused = http.post("/v1/sessions/agent:other:subagent:kid/lifecycle", json={"state": "idle"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        assert http.post(f"/v1/sessions/{KID}/lifecycle", json={"state": "idle"}).status_code == 401


def test_the_python_clients_report_and_fill_in_this_machine(http: httpx.Client, shared_gateway) -> None:
    kid = _family(http, "agent:lccl:main")
    with GatewayClient(shared_gateway.url) as gw:
        out = gw.report_lifecycle(kid, "waiting", pid=os.getpid(), host="codex")
        assert out["changed"] is True and out["lifecycle"]["state"] == "waiting"
        with pytest.raises(InvalidArgument):
            gw.report_lifecycle(kid, "lost")
        with pytest.raises(NotFound):
            gw.report_lifecycle("agent:lccl:nobody", "working")

    async def run() -> dict:
        async with AsyncGatewayClient(shared_gateway.url) as agw:
            return await agw.report_lifecycle(kid, "idle")

    assert asyncio.run(run())["lifecycle"]["state"] == "idle"


def test_metrics_count_sessions_per_state_without_session_labels(gateway_factory) -> None:
    gp = gateway_factory().start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        before = scrape(http)
        assert all(before[("sessionwatch_sessions_lifecycle", (("state", s),))] == 0 for s in ("working", "lost"))
        for i, state in enumerate(["working", "working", "waiting", "ended"]):
            key = f"agent:m:s{i}"
            assert http.put(f"/v1/sessions/{key}", json={}).status_code == 200
            assert http.post(f"/v1/sessions/{key}/lifecycle", json={"state": state}).status_code == 200
        m = scrape(http)
        series = {labels: v for (name, labels), v in m.items() if name == "sessionwatch_sessions_lifecycle"}
        assert series == {
            (("state", "working"),): 2,
            (("state", "waiting"),): 1,
            (("state", "idle"),): 0,
            (("state", "ended"),): 1,
            (("state", "lost"),): 0,
        }
        assert m[("sessionwatch_events_recorded_total", (("kind", "session_working"),))] == 2


def test_with_a_public_url_the_notice_links_the_dashboard_page(gateway_factory) -> None:
    gp = gateway_factory(env={"SESSIONWATCH_PUBLIC_URL": "https://sw.example.test/team"}).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        kid = _family(http)
        http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "ended"})
        (text,) = _notices(http, MAIN)
        assert f'Session "{kid}" changed (other actor). Open: <https://sw.example.test/team/ui/#session/' in text
        assert text.endswith(f'>. Reconcile before acting: session_status sessionKey "{kid}" changesSince 2.')
        # the address is the dashboard's own: it answers, and its hash names the session as the page does
        assert httpx.get(gp.url + "/ui/").status_code == 200


@pytest.mark.slow
def test_a_killed_working_process_is_lost_and_its_parent_told_once(gateway_factory) -> None:
    # A real process stands in for the host: reported working with its pid, then kill -9. The gateway's own
    # timer (lost after 1 s here) finds it gone and records session_lost; the spawn parent gets one notice.
    gp = gateway_factory(env={"SESSIONWATCH_LOST_AFTER_MS": "1000"}).start()
    host = subprocess.Popen(["sleep", "600"])
    try:
        with httpx.Client(base_url=gp.url, timeout=10) as http:
            kid = _family(http)
            res = http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "working", "pid": host.pid})
            assert res.status_code == 200, res.text
            # alive: silence alone does not make it lost (well past the limit)
            wait_until(lambda: _quiet_for(http, kid, 3000), timeout=30, what="3 s of silence")
            assert _state(http, kid) == "working" and _notices(http, MAIN) == []
            os.kill(host.pid, signal.SIGKILL)
            host.wait(10)  # reaped: the pid is gone, not a zombie
            wait_until(lambda: _state(http, kid) == "lost", timeout=60, what="the session lost")
            (notice,) = _notices(http, MAIN)
            assert notice.startswith(f'Session "{kid}" changed (other actor).')
            changes = http.post(
                "/v1/tools/session_status",
                json={"sessionKey": kid, "changesSince": 0},
                headers={"X-Session-Key": "agent:lc:observer"},
            )
            kinds = [e["kind"] for e in changes.json()["stateChanges"]["events"]]
            assert kinds[-2:] == ["session_working", "session_lost"] and kinds.count("session_lost") == 1
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)


def _state(http: httpx.Client, key: str) -> str | None:
    lc = http.get(f"/v1/sessions/{key}").json().get("lifecycle")
    return None if lc is None else str(lc["state"])


def _quiet_for(http: httpx.Client, key: str, ms: int) -> bool:
    import time

    lc = http.get(f"/v1/sessions/{key}").json()["lifecycle"]
    return time.time() * 1000 - lc["since"] >= ms


def test_a_gone_host_process_is_lost_at_once_over_http_and_nothing_else_is(http: httpx.Client) -> None:
    """``POST .../lifecycle/gone``: the reported process, gone, makes a working session lost now (the parent
    told once); another pid, a live process, an idle session or a bad body change nothing."""
    kid = _family(http, label="gone")
    host = subprocess.Popen(["sleep", "600"])
    try:
        assert http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "working", "pid": host.pid}).status_code == 200
        for body in ({}, {"pid": 0}, {"pid": "x"}, {"pid": host.pid, "extra": 1}):
            res = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json=body)
            assert res.status_code == 400, (body, res.text)
        alive = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json={"pid": host.pid}).json()
        assert alive["lost"] is False and alive["lifecycle"]["state"] == "working"  # it still runs here
        other = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json={"pid": host.pid + 1}).json()
        assert other["lost"] is False
        host.kill()
        host.wait()
        gone = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json={"pid": host.pid}).json()
        assert gone["lost"] is True and gone["lifecycle"]["state"] == "lost"
        assert [e["kind"] for e in gone["events"]] == ["session_lost"]
        again = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json={"pid": host.pid}).json()
        assert again["lost"] is False and again["events"] == []  # once
        assert len([t for t in _notices(http, MAIN) if kid in t]) == 1
        assert http.post("/v1/sessions/agent:lc:nobody/lifecycle/gone", json={"pid": 5}).status_code == 404
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def test_idle_is_never_lost_by_a_gone_report(http: httpx.Client) -> None:
    kid = _family(http, label="idle")
    assert http.post(f"/v1/sessions/{kid}/lifecycle", json={"state": "idle", "pid": 999_999}).status_code == 200
    out = http.post(f"/v1/sessions/{kid}/lifecycle/gone", json={"pid": 999_999}).json()
    assert out["lost"] is False and out["lifecycle"]["state"] == "idle"
