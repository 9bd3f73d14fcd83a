"""Keys that could hide or reorder words, through the real HTTP gateway (issue 19, item 5): refused with
400 invalid_argument on every way a key comes in (path, caller header, tool argument, adoption), nothing
created; the non-ASCII keys v1 accepts round-trip byte for byte; notice text never carries the raw
characters."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.errors import InvalidArgument
from sessionwatch.headers import encode_header_value

HIDING = ["\u202e", "\u2066", "\u200b", "\u009b"]


def seg(key: str) -> str:
    return quote(key, safe=":@")


def every_session(http: httpx.Client, caller: str) -> list[Any]:
    res = http.post("/v1/tools/sessions_list", json={"limit": 1000}, headers={"X-Session-Key": caller})
    assert res.status_code == 200, res.text
    return sorted(s["sessionKey"] for s in res.json()["sessions"])


@pytest.mark.parametrize("ch", HIDING)
def test_every_http_door_refuses_such_a_key_and_creates_nothing(http: httpx.Client, ch: str) -> None:
    agent = f"h{uuid.uuid4().hex[:8]}"
    main = f"agent:{agent}:main"
    assert http.put(f"/v1/sessions/{main}", json={}).status_code == 200
    bad = f"agent:{agent}:subagent:note{ch}txt.exe"
    before = (every_session(http, main), http.get("/v1/events", params={"after": 0, "limit": 1000}).json())
    attempts = [
        http.put(f"/v1/sessions/{seg(bad)}", json={}),
        http.put(f"/v1/sessions/{seg(main)}", json={"spawnedBy": bad}),
        http.post(f"/v1/sessions/{seg(bad)}/system-events", json={"text": "hello"}),
        http.post("/v1/tools/sessions_spawn", json={"sessionKey": bad}, headers={"X-Session-Key": main}),
        http.post("/v1/tools/sessions_spawn", json={"label": f"n{ch}"}, headers={"X-Session-Key": main}),
        http.post("/v1/tools/sessions_list", json={}, headers={"X-Session-Key": encode_header_value(bad)}),
        http.post("/v1/watch", json={"watcher": main, "target": bad}),
        http.post("/v1/catalogs/claude/threads/t/continue", json={"sessionKey": bad}),
        http.post("/v1/catalogs/claude/threads/t/continue", json={"agentId": f"{agent}{ch}"}),
    ]
    for res in attempts:
        assert res.status_code == 400, (res.request.method, res.request.url, res.text)
        assert res.json()["error"]["code"] == "invalid_argument", res.text
        assert ch not in res.text  # the error shows the key escaped
    after = (every_session(http, main), http.get("/v1/events", params={"after": 0, "limit": 1000}).json())
    assert after == before


@pytest.mark.parametrize(
    "rest", ["café-crème", "チャット", "🚀launch", "👩\u200d💻pair", "\ufeffnotes", "שלום", "x\u200cy"]
)
def test_the_non_ascii_keys_v1_accepts_work_byte_for_byte_over_http(shared_gateway: Any, rest: str) -> None:
    agent = f"h{uuid.uuid4().hex[:8]}"
    main, key = f"agent:{agent}:main", f"agent:{agent}:{rest}"
    with GatewayClient(shared_gateway.url, timeout=10) as client:
        client.put_session(main)
        assert client.put_session(key)["sessionKey"] == key
        assert client.watch(main, key)
        client.inbound(key, "a person typed this", channel="web")
        [entry] = client.peek_system_events(main)
        assert entry["text"] == (
            f'Session "{key}" changed (other actor). Reconcile before acting: '
            f'session_status sessionKey "{key}" changesSince 0.'
        )
        out = client.call_tool("session_status", {"sessionKey": key, "changesSince": 0}, caller=main)
        assert out["sessionKey"] == key and key in out["text"]
        as_caller = client.call_tool("sessions_list", {}, caller=key)  # through the X-Session-Key header
        assert key in [s["sessionKey"] for s in as_caller["sessions"]]
        assert client.get_session(key)["sessionKey"] == key
        with pytest.raises(InvalidArgument):
            client.put_session(key + "\u202e")
