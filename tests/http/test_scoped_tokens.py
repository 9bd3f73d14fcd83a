"""Tokens scoped to agents, against a real gateway on loopback.

The matrix sends every route of the app (enumerated from its endpoint table, so a new route cannot
escape) with six credentials: none, a wrong token, a revoked token, a token of another agent, a token
of the session's own agent, and the admin token.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.http.app import create_app
from sessionwatch.http.middleware import OPEN_PATHS
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token, revoke_token
from tests.support.waiting import wait_until

ADMIN = "admin-token-for-the-matrix-0123456789"
OWN, OTHER = "own", "oth"
OWN_MAIN, OWN_KID, OTHER_MAIN = "agent:own:main", "agent:own:kid", "agent:oth:main"

# What a token of another agent (or of the session's own agent) may do, by route. Every other route is
# session-scoped: the owner's token may use it, another agent's token is refused (403).
ANY_TOKEN = {"openapi"}
FILTERED = {
    "events_after",
    "cursors",
    "stream_log",
    "ui_overview",
    "ui_health",
}  # answered, narrowed to the token's agents
ADMIN_ONLY = {
    "prune",
    "sweep",
    "list_threads",
    "continue_thread",
    "upstream_tick",
    "upstream_results",
    "pair_node",
    "metrics",
}

PATH_VALUES = {
    "key": OWN_MAIN,
    "name": "session_status",
    "runId": "run-m",
    "catalogId": "claude",
    "threadId": "nope",
    "nodeId": "n1",
    "host": "claude-code",
}
# Bodies for routes whose body must name what they touch; any other route gets {} (a new route too).
BODIES: dict[str, dict[str, Any]] = {
    "watch": {"watcher": OWN_MAIN, "target": OWN_KID},
    "unwatch": {"watcher": OWN_MAIN, "target": OWN_KID},
    "inbound": {"text": "hi", "channel": "cli"},
    "enqueue_system_event": {"text": "note"},
    "append_message": {"role": "assistant", "text": "ok"},
    "end_run": {"status": "ok"},
    "begin_run": {"runId": "run-m"},
    "record_compaction": {"operationId": "op-1"},
    "set_goal": {"action": "create", "objective": "ship"},
    "pair_node": {"url": "http://127.0.0.1:9/", "token": "x" * 32},
    # the key is made from the input: agent:own:claude:s1 (the agent: the name of its cwd)
    "answer_own_hook": {"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": "/home/dev/own"},
}


@dataclass
class Setup:
    url: str
    tokens: dict[str, str]  # credential name -> token text
    own_id: str
    store_url: str


def _endpoints() -> list[Any]:
    """The app's own route table (not a copy): a route added anywhere shows up here."""
    return list(create_app(lambda: None).state.endpoints)  # type: ignore[arg-type, return-value]


def _concrete(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: PATH_VALUES.get(m.group(1), "x"), path)


@pytest.fixture
def setup(gateway_factory, tmp_path: Path) -> Iterator[Setup]:
    store_url = f"sqlite:///{tmp_path}/state.db"
    store = open_store(store_url)
    own, own_row = create_token(store, agents=[OWN], name="own team")
    other, _ = create_token(store, agents=[OTHER])
    revoked, revoked_row = create_token(store, agents=[OWN])
    revoke_token(store, revoked_row.token_id)
    store.close()
    wrong = f"sw_{own_row.token_id}_" + "A" * 43  # the right id with a wrong secret
    gp = gateway_factory(store_url, token=ADMIN).start()
    with GatewayClient(gp.url, token=ADMIN) as gw:
        for key in (OWN_MAIN, OWN_KID, OTHER_MAIN):
            gw.put_session(key)
        gw.watch(OWN_MAIN, OWN_KID)
        gw.watch(OTHER_MAIN, OWN_KID)
        gw.inbound(OWN_KID, "a person typed", channel="cli")
        gw.inbound(OTHER_MAIN, "other team's secret", channel="cli")
        gw.set_goal(OTHER_MAIN, "create", objective="the other team's plan")
    yield Setup(
        gp.url,
        {"none": "", "wrong": wrong, "revoked": revoked, "other": other, "own": own, "admin": ADMIN},
        own_row.token_id,
        store_url,
    )


def _send(http: httpx.Client, ep: Any, token: str) -> httpx.Response:
    headers = {"X-Session-Key": OWN_MAIN}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    params = {"sessionKey": OWN_MAIN} if "sessionKey" in ep.query else {}
    body = BODIES.get(ep.op_id, {}) if ep.body is not None else None
    if ep.op_id in ("stream_wakes", "stream_log"):
        with http.stream("GET", _concrete(ep.path), params=params, headers=headers) as res:
            if res.status_code == 200:  # a live stream: what matters is that it was opened
                return httpx.Response(200, text="(stream)")
            res.read()
            return res
    return http.request(ep.method, _concrete(ep.path), params=params, headers=headers, json=body)


def test_every_route_times_every_credential(setup: Setup) -> None:
    endpoints = _endpoints()
    assert len(endpoints) >= 30
    seen: dict[tuple[str, str], int] = {}
    with httpx.Client(base_url=setup.url, timeout=10) as http:
        # delete_session last, so the other routes find the session
        for ep in sorted(endpoints, key=lambda e: e.op_id == "delete_session"):
            op = ep.op_id
            for cred in ("none", "wrong", "revoked", "other", "own", "admin"):
                res = _send(http, ep, setup.tokens[cred])
                seen[(op, cred)] = res.status_code
                where = f"{ep.method} {ep.path} as {cred}: {res.status_code} {res.text[:200]}"
                assert res.status_code < 500 or op in ADMIN_ONLY, where
                if ep.path in OPEN_PATHS:
                    assert res.status_code not in (401, 403), where
                elif cred in ("none", "wrong", "revoked"):
                    assert res.status_code == 401, where
                    assert res.json()["error"]["code"] == "unauthorized", where
                elif cred == "admin" or (cred == "own" and op not in ADMIN_ONLY) or op in ANY_TOKEN | FILTERED:
                    assert res.status_code not in (401, 403), where
                else:
                    assert res.status_code == 403, where
                    assert res.json()["error"]["code"] == "forbidden", where
    # the matrix really exercised the routes: the owner got real answers, not just "not refused"
    assert seen[("get_session", "own")] == 200 and seen[("inbound", "own")] == 200
    assert seen[("call_tool", "own")] == 200 and seen[("stream_wakes", "own")] == 200
    assert seen[("peek_system_events", "own")] == 200 and seen[("drain_system_events", "own")] == 200


def test_filtered_reads_show_only_the_tokens_agents(setup: Setup) -> None:
    with (
        GatewayClient(setup.url, token=setup.tokens["own"]) as own,
        GatewayClient(setup.url, token=setup.tokens["other"]) as other,
    ):
        mine = own.events_after(0, 1000)
        assert mine and {e["agentId"] for e in mine} == {OWN}
        theirs = other.events_after(0, 1000)
        assert theirs and {e["agentId"] for e in theirs} == {OTHER}
        # a page is 'limit' of the token's own events, so tailing never stalls on others' events
        assert len(own.events_after(0, 1)) == 1
        assert {(c["watcher"], c["target"]) for c in own.cursors()} == {(OWN_MAIN, OWN_KID)}
        assert other.cursors() == []  # oth watches own's kid: a pair across agents is not its view
        listed = own.call_tool("sessions_list", {}, caller=OWN_MAIN)["sessions"]
        assert {s["sessionKey"] for s in listed} == {OWN_MAIN, OWN_KID}
        refused = own.call_tool("sessions_list", {"agentId": OTHER}, caller=OWN_MAIN)
        assert refused["error"]["code"] == "forbidden"


def test_tools_refuse_other_agents_as_caller_and_as_target(setup: Setup) -> None:
    with GatewayClient(setup.url, token=setup.tokens["own"]) as own:
        for name, args in (
            ("session_status", {"sessionKey": OTHER_MAIN}),
            ("sessions_history", {"sessionKey": OTHER_MAIN}),
            ("sessions_send", {"sessionKey": OTHER_MAIN, "message": "hi"}),
            ("session_unwatch", {"sessionKey": OTHER_MAIN}),
            ("sessions_spawn", {"agentId": OTHER, "label": "x"}),
            ("sessions_spawn", {"sessionKey": "agent:oth:subagent:x"}),
            ("session_status", {"sessionKey": "agent:oth:never-created"}),
        ):
            out = own.call_tool(name, args, caller=OWN_MAIN)
            assert out["error"]["code"] == "forbidden", (name, args, out)
        # acting as another agent's session is refused whatever the tool
        assert own.call_tool("session_status", {}, caller=OTHER_MAIN)["error"]["code"] == "forbidden"
        assert own.call_tool("sessions_list", {}, caller="global", agent_id=OTHER)["error"]["code"] == "forbidden"
        # nothing of the other agent's transcript leaked, nothing was sent into it
    with GatewayClient(setup.url, token=ADMIN) as admin:
        history = admin.call_tool("sessions_history", {"sessionKey": OTHER_MAIN}, caller=OTHER_MAIN)
        assert [m["text"] for m in history["messages"]] == ["other team's secret"]
        # its own agent's tools work as before
    with GatewayClient(setup.url, token=setup.tokens["own"]) as own:
        assert (
            own.call_tool("sessions_send", {"sessionKey": OWN_KID, "message": "go"}, caller=OWN_MAIN)["status"]
            == "accepted"
        )
        assert own.call_tool("session_status", {"sessionKey": OWN_KID, "changesSince": 0}, caller=OWN_MAIN)[
            "stateChanges"
        ]["events"]


def test_a_session_body_may_not_name_another_agents_session(setup: Setup) -> None:
    headers = {"Authorization": f"Bearer {setup.tokens['own']}"}
    with httpx.Client(base_url=setup.url, timeout=10) as http:
        # a spawn parent gets the child's notices in its queue; a source is who a turn claims to be from
        res = http.put("/v1/sessions/agent:own:adopted", json={"spawnedBy": OTHER_MAIN}, headers=headers)
        assert res.status_code == 403, res.text
        res = http.post(
            f"/v1/sessions/{OWN_MAIN}/inbound",
            headers=headers,
            json={"text": "hi", "channel": "cli", "provenance": "inter_session", "sourceSessionKey": OTHER_MAIN},
        )
        assert res.status_code == 403, res.text
        assert http.get("/v1/sessions/agent:own:adopted", headers=headers).status_code == 404  # nothing written
        res = http.put("/v1/sessions/agent:own:adopted", json={"spawnedBy": OWN_MAIN}, headers=headers)
        assert res.status_code == 200, res.text


def test_cross_agent_send_needs_a_token_covering_both(setup: Setup) -> None:
    store = open_store(setup.store_url)
    both, _ = create_token(store, agents=[OWN, OTHER])
    store.close()
    args = {"sessionKey": OTHER_MAIN, "message": "from own"}
    with GatewayClient(setup.url, token=setup.tokens["own"]) as own:
        assert own.call_tool("sessions_send", args, caller=OWN_MAIN)["error"]["code"] == "forbidden"
    with GatewayClient(setup.url, token=both) as gw:
        assert gw.call_tool("sessions_send", args, caller=OWN_MAIN)["status"] == "accepted"


def test_wake_stream_only_for_the_tokens_watchers(setup: Setup) -> None:
    with GatewayClient(setup.url, token=setup.tokens["other"]) as other:
        with pytest.raises(Exception) as refused:
            next(other.stream_wakes(OWN_MAIN, timeout=5))
        assert getattr(refused.value, "code", "") == "forbidden"
    watcher = "agent:own:w2"
    with GatewayClient(setup.url, token=setup.tokens["own"]) as own, GatewayClient(setup.url, token=ADMIN) as admin:
        admin.put_session(watcher)
        admin.watch(watcher, OWN_KID)
        got: list[dict[str, Any]] = []
        as_admin = {"Authorization": f"Bearer {ADMIN}"}  # health shows the stream count to an admin only
        streams = httpx.get(f"{setup.url}/v1/health", headers=as_admin).json()["streams"]
        reader = threading.Thread(target=lambda: got.append(next(own.stream_wakes(watcher, timeout=10))))
        reader.start()
        wait_until(
            lambda: httpx.get(f"{setup.url}/v1/health", headers=as_admin).json()["streams"] > streams,
            what="the wake stream subscribed",
        )
        admin.inbound(OWN_KID, "another person's turn", channel="cli")
        reader.join(15)
        assert got and got[0]["watcher"] == watcher and got[0]["target"] == OWN_KID


def test_a_revoked_token_is_refused_within_a_second(setup: Setup) -> None:
    headers = {"Authorization": f"Bearer {setup.tokens['own']}"}
    with httpx.Client(base_url=setup.url, timeout=10) as http:
        assert http.get(f"/v1/sessions/{OWN_MAIN}", headers=headers).status_code == 200
        store = open_store(setup.store_url)
        revoke_token(store, setup.own_id)
        store.close()
        wait_until(
            lambda: http.get(f"/v1/sessions/{OWN_MAIN}", headers=headers).status_code != 200,
            timeout=1.0,
            what="the revoked token refused",
        )
        assert http.get(f"/v1/sessions/{OWN_MAIN}", headers=headers).status_code == 401


def test_a_stored_admin_token_sees_everything(setup: Setup) -> None:
    store = open_store(setup.store_url)
    admin, _ = create_token(store, admin=True, name="oncall")
    store.close()
    with GatewayClient(setup.url, token=admin) as gw:
        assert {e["agentId"] for e in gw.events_after(0, 1000)} == {OWN, OTHER}
        assert gw.sweep() >= 0


def test_tokens_are_stored_hashed(setup: Setup) -> None:
    db = Path(setup.store_url.removeprefix("sqlite:///"))
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))  # the file and its WAL
    for name in ("own", "other", "revoked"):
        token = setup.tokens[name]
        assert token.encode() not in raw and token.split("_", 2)[2].encode() not in raw
        assert hashlib.sha256(token.encode()).hexdigest().encode() in raw  # the row is there, hashed
