"""The manager/child/person flow end to end through a real gateway process, raw HTTP and GatewayClient."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from sessionwatch import Gateway
from sessionwatch.client import GatewayClient
from sessionwatch.errors import InvalidArgument, NotFound
from sessionwatch.notices import notice_text
from tests.support.waiting import wait_until

MANAGER = "agent:main:main"


def tool(http: httpx.Client, name: str, args: dict[str, Any], caller: str) -> httpx.Response:
    return http.post(f"/v1/tools/{name}", json=args, headers={"X-Session-Key": caller})


def test_manager_child_person_flow(http: httpx.Client) -> None:
    manager = "agent:flow:main"
    assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
    spawned = tool(http, "sessions_spawn", {"label": "worker", "task": "build the parser"}, manager)
    assert spawned.status_code == 200, spawned.text
    child, v0 = spawned.json()["sessionKey"], spawned.json()["stateVersion"]
    assert child == "agent:flow:subagent:worker" and v0 > 0

    # A person types into the child three times: the manager's queue gets exactly one notice.
    for text in ("stop, use the other grammar", "and keep the tests", "thanks"):
        res = http.post(f"/v1/sessions/{child}/inbound", json={"text": text, "channel": "telegram", "humanId": "ana"})
        assert res.status_code == 200, res.text
        assert res.json()["recorded"] is True and res.json()["event"]["kind"] == "human_direct_message"
    queue = http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]
    assert [e["text"] for e in queue] == [notice_text(child, v0)]
    assert queue[0]["line"].startswith("System: [") and queue[0]["line"].endswith(notice_text(child, v0))

    # Reconciliation: the exact typed delta since the notice's L. The manager watches the child, so the
    # read acknowledges what it returned (beyond v1): its cursor moves to the last sequence and the
    # notice the answer covers is withdrawn; nothing is left to drain.
    status = tool(http, "session_status", {"sessionKey": child, "changesSince": v0}, manager).json()
    kinds = [e["kind"] for e in status["stateChanges"]["events"]]
    assert kinds == ["human_direct_message"] * 3
    assert status["stateVersion"] == status["stateChanges"]["events"][-1]["sequence"]
    assert "Session state changes:" in status["text"]
    cursor = http.get("/v1/cursors", params={"watcher": manager, "target": child}).json()["cursors"][0]
    assert cursor["lastSeen"] == cursor["material"] == status["stateVersion"]
    assert http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()["entries"] == []

    # The next human message is a fresh notice from the acknowledged point.
    http.post(f"/v1/sessions/{child}/inbound", json={"text": "one more thing", "channel": "telegram"})
    queue = http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]
    assert [e["text"] for e in queue] == [notice_text(child, status["stateVersion"])]

    # The manager's own send is never a human message and does not notify itself.
    sent = tool(http, "sessions_send", {"sessionKey": child, "message": "carry on", "watch": True}, manager).json()
    assert sent["status"] == "accepted" and sent["watched"] is True
    version = http.get(f"/v1/sessions/{child}/state-version").json()["stateVersion"]
    assert version == status["stateVersion"] + 1


def test_sessions_send_waits_for_reply_off_the_event_loop(http: httpx.Client) -> None:
    a, b = "agent:wait:main", "agent:wait:helper"
    for key in (a, b):
        http.put(f"/v1/sessions/{key}", json={})
    results: dict[str, Any] = {}

    def send() -> None:
        results["send"] = tool(http, "sessions_send", {"sessionKey": b, "message": "ping", "timeoutSeconds": 10}, a)

    waiter = threading.Thread(target=send)
    waiter.start()
    # The send has reached the gateway once "ping" is in b's transcript; from there it waits for a reply.
    wait_until(lambda: "ping" in tool(http, "sessions_history", {"sessionKey": b}, a).text, what="the send's message")
    # While the send waits, the gateway keeps answering other requests.
    started = time.monotonic()
    assert http.get("/v1/health").status_code == 200
    assert time.monotonic() - started < 1.0
    assert http.post(f"/v1/sessions/{b}/messages", json={"role": "assistant", "text": "pong"}).status_code == 200
    waiter.join(10)
    res = results["send"]
    assert res.status_code == 200 and res.json()["status"] == "ok" and res.json()["reply"] == "pong"


def test_keys_with_colons_and_slashes_in_paths(http: httpx.Client) -> None:
    key = "agent:paths:dir/with/slashes:x"
    assert http.put("/v1/sessions/agent%3Apaths%3Adir%2Fwith%2Fslashes%3Ax", json={}).status_code == 200
    got = http.get("/v1/sessions/agent%3Apaths%3Adir%2Fwith%2Fslashes%3Ax").json()
    assert got["sessionKey"] == key
    with GatewayClient(str(http.base_url)) as client:
        assert client.get_session(key)["sessionKey"] == key
        assert client.state_version(key) == 0
        assert client.peek_system_events(key) == []


def _normalize(value: Any) -> Any:
    volatile = {"sessionId", "createdAt", "updatedAt", "ts", "occurredAt", "at", "messageId", "id"}
    if isinstance(value, dict):
        return {k: "<v>" if k in volatile else _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, str):
        value = re.sub(r"[0-9a-f]{32}", "<id>", value)
        value = re.sub(r"\b1\d{12}\b", "<ms>", value)  # epoch milliseconds inside the status JSON block
        return re.sub(r"System: \[[^\]]+\]", "System: [<t>]", value)
    return value


def _script(gw: Any) -> list[Any]:
    """The same calls against Gateway and GatewayClient; the results must be identical."""
    m, c = MANAGER, "agent:main:subagent:kid"
    out: list[Any] = [gw.put_session(m), gw.put_session("agent:main:group:room-1")]
    out.append(gw.call_tool("sessions_spawn", {"label": "kid", "runId": "run-1"}, caller=m))
    out.append(gw.inbound(c, "hello", channel="web", human_id="ana"))
    out.append(gw.set_goal(c, "create", objective="ship it", actor={"type": "human", "id": "ana"}))
    out.append(gw.begin_run(c, "run-2"))
    out.append(gw.end_run(c, "run-2", "error"))
    out.append(gw.record_compaction(c, "op-1"))
    out.append(gw.append_message(c, "assistant", "done"))
    out.append(gw.enqueue_system_event(m, "deploy finished", context_key="deploy"))
    out.append(gw.peek_system_events(m))
    out.append(gw.call_tool("session_status", {"sessionKey": c, "changesSince": 0}, caller=m))
    listed = gw.call_tool("sessions_list", {}, caller=m)  # ordered by update time: compare as sets
    out.append([sorted(listed["sessions"], key=lambda r: r["sessionKey"]), sorted(listed["text"].splitlines())])
    out.append(gw.call_tool("sessions_history", {"sessionKey": c}, caller=m))
    out.append(gw.call_tool("session_status", {"changesSince": -1}, caller=m))  # an error object, not raised
    out.append(gw.call_tool("nope", {}, caller=m))
    out.append(len(gw.call_tool("sessions_list", {}, caller="global", agent_id="main")["sessions"]))
    out.append(gw.cursors(watcher=m))
    out.append(gw.state_version(c))
    out.append(gw.drain_system_events(m))
    out.append(gw.watch(m, "agent:main:group:room-1"))
    out.append(gw.unwatch(m, "agent:main:group:room-1"))
    out.append(gw.get_session(c))
    out.append(gw.reset_session(c))
    out.append(gw.events_after(0, 50))
    out.append(gw.prune().to_json())
    out.append(gw.sweep())
    out.append(gw.delete_session(c))
    out.append(gw.delete_session(c))
    for call in (
        lambda: gw.get_session(c),
        lambda: gw.inbound(m, "", channel="web"),
        lambda: gw.set_goal(m, "explode"),
    ):
        try:
            call()
            out.append("no error")
        except (NotFound, InvalidArgument) as exc:
            out.append([type(exc).__name__, exc.code, exc.message])
    return out


def test_client_matches_in_process_gateway(gateway_factory, tmp_path: Path) -> None:
    local = Gateway.open(f"sqlite:///{tmp_path}/local.db")
    try:
        expected = _normalize(_script(local))
    finally:
        local.close()
    gp = gateway_factory(f"sqlite:///{tmp_path}/remote.db").start()
    with GatewayClient(gp.url) as client:
        got = _normalize(_script(client))
        assert client.health()["status"] == "ok"
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"call #{i} differs"
