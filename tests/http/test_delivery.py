"""At-least-once delivery over HTTP: a client whose connection drops before it reads the answer finds
its notices again, exactly once, on its next call (issue 8, item 2)."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.errors import SessionwatchError
from sessionwatch.notices import notice_text
from tests.support.waiting import wait_until


def _family(http: httpx.Client, name: str) -> tuple[str, str, int]:
    manager = f"agent:{name}:main"
    assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
    spawned = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": manager}).json()
    child = spawned["sessionKey"]
    assert http.post(f"/v1/sessions/{child}/inbound", json={"text": "stop", "channel": "web"}).json()["recorded"]
    return manager, child, spawned["stateVersion"]


def _queue_reads(base_url: str) -> float:
    """How many queue reads (store operations "peek" and "lease": a peek, or a drain taking its entries)
    the gateway has finished, from GET /metrics."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(
            (
                'sessionwatch_store_operation_seconds_count{operation="peek"}',
                'sessionwatch_store_operation_seconds_count{operation="lease"}',
            )
        )
    )


def _send_and_hang_up(base_url: str, method: str, path: str, body: bytes = b"") -> None:
    """Send one complete request, then close the connection without reading a byte of the answer; return
    once the gateway has read the queue for it (after the client was gone)."""
    url = urlsplit(base_url)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    ).encode()
    before = _queue_reads(base_url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        # Corked, the request leaves with the close, in the segment that carries the FIN: the gateway can
        # never answer it before the hang-up, however long this process waits between the two calls.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        sock.sendall(head + body)
    wait_until(lambda: _queue_reads(base_url) > before, what="the gateway reading the queue for the hung-up request")


def _texts(entries: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in entries]


def test_a_drain_whose_client_hung_up_keeps_its_notice(http: httpx.Client, shared_gateway: Any) -> None:
    manager, child, v0 = _family(http, "hangup")
    _send_and_hang_up(shared_gateway.url, "POST", f"/v1/sessions/{manager}/system-events/drain", b"{}")
    # the hung-up drain holds its entries until the gateway sees the connection gone (a moment on a busy
    # machine), then frees them: the next drains get them, once
    drained = wait_until(
        lambda: http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()["entries"],
        timeout=40,
        what="the hung-up drain's entries back",
    )
    assert _texts(drained) == [notice_text(child, v0)]  # still there: delivered now ...
    assert http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()["entries"] == []  # ... once
    cursor = http.get("/v1/cursors", params={"watcher": manager, "target": child}).json()["cursors"][0]
    assert cursor["lastSeen"] == cursor["material"]


def test_a_drain_answer_ends_after_its_acknowledgment(http: httpx.Client) -> None:
    manager, child, v0 = _family(http, "readback")
    drained = http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
    assert drained.status_code == 200 and _texts(drained.json()["entries"]) == [notice_text(child, v0)]
    assert http.get(f"/v1/sessions/{manager}/system-events").json()["entries"] == []


def test_peek_hang_up_peek_ack(http: httpx.Client, shared_gateway: Any) -> None:
    manager, child, v0 = _family(http, "peekack")
    http.post(f"/v1/sessions/{manager}/system-events", json={"text": "cron tick", "contextKey": "cron:x"})
    _send_and_hang_up(shared_gateway.url, "GET", f"/v1/sessions/{manager}/system-events")
    first = http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]
    assert _texts(first) == [notice_text(child, v0), "cron tick"]
    again = http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]
    assert again == first  # the same entries with the same ids on every peek
    res = http.post(f"/v1/sessions/{manager}/system-events/ack", json={"ids": [first[0]["id"]]})
    assert res.status_code == 200 and res.json() == {"acknowledged": 1}
    assert _texts(http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]) == ["cron tick"]
    repeat = http.post(f"/v1/sessions/{manager}/system-events/ack", json={"ids": [first[0]["id"]]})
    assert repeat.json() == {"acknowledged": 0}  # an ack that is retried changes nothing
    cursor = http.get("/v1/cursors", params={"watcher": manager, "target": child}).json()["cursors"][0]
    assert cursor["lastSeen"] == cursor["material"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ids": "1"},
        {"ids": [True]},
        {"ids": [1.5]},
        {"ids": [0]},
        {"ids": [2**63]},
        {"ids": list(range(1, 1002))},
        {"ids": [1], "x": 1},
    ],
)
def test_bad_ack_bodies_are_400(http: httpx.Client, body: dict[str, Any]) -> None:
    manager, child, v0 = _family(http, "badack")
    before = http.get(f"/v1/sessions/{manager}/system-events").json()
    res = http.post(f"/v1/sessions/{manager}/system-events/ack", json=body)
    assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument", res.text
    assert http.get(f"/v1/sessions/{manager}/system-events").json() == before


def test_the_client_peeks_and_acks(http: httpx.Client, shared_gateway: Any) -> None:
    manager, child, v0 = _family(http, "client")
    with GatewayClient(shared_gateway.url) as gw:
        entries = gw.peek_system_events(manager)
        assert _texts(entries) == [notice_text(child, v0)]
        assert gw.ack_system_events(manager, [e["id"] for e in entries]) == {"acknowledged": 1}
        assert gw.peek_system_events(manager) == []
        with pytest.raises(SessionwatchError) as info:
            gw.ack_system_events(manager, ["x"])
        assert info.value.code == "invalid_argument"


def test_openapi_lists_the_ack_route(http: httpx.Client) -> None:
    doc = http.get("/v1/openapi.json").json()
    op = doc["paths"]["/v1/sessions/{key}/system-events/ack"]["post"]
    assert op["operationId"] == "ack_system_events"
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["ids"]
    entry = doc["components"]["schemas"]["QueueEntry"]
    assert "id" in entry["required"]


def test_the_reconcile_setting_from_the_environment() -> None:
    from sessionwatch.errors import InvalidArgument
    from sessionwatch.http.config import settings_from_env

    assert settings_from_env(environ={}).reconcile_acknowledges is True  # the default: beyond v1
    assert settings_from_env(environ={"SESSIONWATCH_RECONCILE_ACKS": "0"}).reconcile_acknowledges is False
    assert settings_from_env(environ={"SESSIONWATCH_RECONCILE_ACKS": "true"}).reconcile_acknowledges is True
    with pytest.raises(InvalidArgument):
        settings_from_env(environ={"SESSIONWATCH_RECONCILE_ACKS": "maybe"})


def test_a_strict_v1_gateway_leaves_cursors_alone(gateway_factory: Any) -> None:
    gp = gateway_factory(env={"SESSIONWATCH_RECONCILE_ACKS": "0"}).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        manager, child, v0 = _family(http, "strict")
        res = http.post(
            "/v1/tools/session_status",
            json={"sessionKey": child, "changesSince": v0},
            headers={"X-Session-Key": manager},
        )
        assert len(res.json()["stateChanges"]["events"]) == 1
        cursor = http.get("/v1/cursors", params={"watcher": manager, "target": child}).json()["cursors"][0]
        assert cursor["lastSeen"] == v0
        assert _texts(http.get(f"/v1/sessions/{manager}/system-events").json()["entries"]) == [notice_text(child, v0)]
