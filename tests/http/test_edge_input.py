"""Bad input at the HTTP edge (issue 8, item 7): numbers, caller headers, path bytes, trailing slashes."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.errors import InvalidArgument
from sessionwatch.headers import decode_header_value, encode_header_value

MANAGER = "agent:édge:main"  # non-ASCII agent id and key
KID_LABEL = "kïd-ü"
MAX = 2**63 - 1


def raw_request(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send exact bytes (httpx would normalize the path or refuse the header)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.fixture
def port(shared_gateway) -> int:
    return shared_gateway.port


def test_header_encoding_round_trips() -> None:
    for value in ("agent:main:main", "agent:équipe:fil-🧵", "agent:a:100%", "global"):
        encoded = encode_header_value(value)
        assert encoded.isascii() and " " not in encoded
        assert decode_header_value(encoded.encode(), "X") == value
    assert encode_header_value("agent:main:main") == "agent:main:main"  # ordinary keys are unchanged
    assert encode_header_value("a%b") == "a%25b"
    with pytest.raises(InvalidArgument):
        decode_header_value(b"agent:a:%FF", "X-Session-Key")


def test_non_ascii_keys_call_tools_through_the_client(shared_gateway) -> None:
    with GatewayClient(shared_gateway.url) as gw:
        gw.put_session(MANAGER)
        spawned = gw.call_tool("sessions_spawn", {"label": KID_LABEL}, caller=MANAGER)
        assert "error" not in spawned, spawned
        kid = spawned["sessionKey"]
        gw.inbound(kid, "a person typed", channel="webchat")
        (line,) = [e["line"] for e in gw.drain_system_events(MANAGER)]  # the notice names the non-ASCII key
        assert kid in line
        status = gw.call_tool("session_status", {"sessionKey": kid, "changesSince": 0}, caller=MANAGER)
        assert "error" not in status, status
        assert [e["kind"] for e in status["stateChanges"]["events"]][-1] == "human_direct_message"
        assert gw.call_tool("session_status", {}, caller=MANAGER)["sessionKey"] == MANAGER
        # A bare 'global' caller names a non-ASCII agent in X-Agent-Id the same way.
        gw.put_session("global", agent_id="ópś")
        assert gw.call_tool("session_status", {}, caller="global", agent_id="ópś")["agentId"] == "ópś"


def test_caller_header_that_is_not_utf8_is_400(port: int) -> None:
    body = b"{}"
    for header in (b"agent:a:%FFx", b"agent:a:\xff\xfe"):
        status, _, out = raw_request(
            port,
            b"POST /v1/tools/session_status HTTP/1.1\r\n"
            + b"Host: localhost:%d\r\n" % port
            + b"X-Session-Key: "
            + header
            + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n" + body,
        )
        assert status == 400 and b"invalid_argument" in out and b"UTF-8" in out, out


def test_invalid_utf8_in_a_path_or_query_is_400_never_a_replacement_key(http: httpx.Client, port: int) -> None:
    before = http.get("/v1/events", params={"limit": 1000}).json()
    for target in (
        b"/v1/sessions/agent:a:%FF",
        b"/v1/sessions/agent:a:%C3%28/inbound",
        b"/v1/sessions/agent%3Aa%3A%ED%A0%80",
        b"/v1/stream?sessionKey=agent:a:%FF",
        b"/v1/cursors?watcher=agent:a:%E9",
    ):
        method = b"POST" if target.endswith(b"/inbound") else b"PUT" if target.count(b"/") == 3 else b"GET"
        payload = b'{"text": "t", "channel": "c"}' if method == b"POST" else b"{}"
        status, headers, out = raw_request(
            port,
            method + b" " + target + b" HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(payload)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + payload,
        )
        assert status == 400, (target, out)
        assert headers["content-type"].startswith("application/json") and b"invalid_argument" in out
    assert http.get("/v1/events", params={"limit": 1000}).json() == before
    assert "\ufffd" not in str(
        http.post("/v1/tools/sessions_list", json={"limit": 1000}, headers={"X-Session-Key": "agent:a:main"}).json()
    )


def test_trailing_slash_is_a_plain_404_that_echoes_nothing(port: int) -> None:
    for target in (b"/v1/sessions/agent:a:b/", b"/v1/sessions/agent:a:b%2Fc/", b"/v1/health/"):
        status, headers, out = raw_request(
            port, b"GET " + target + b" HTTP/1.1\r\n" + b"Host: localhost:%d\r\nConnection: close\r\n\r\n" % port
        )
        assert status == 404 and "location" not in headers, (target, headers)
        assert b"localhost" not in out and "\ue000".encode() not in out, out
        assert b"not_found" in out
        # A foreign Host is refused before routing (docs/security.md), and is not echoed either.
        status, headers, out = raw_request(
            port, b"GET " + target + b" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
        )
        assert status == 421 and "location" not in headers and b"evil.example" not in out, (target, out)


def test_changes_since_and_after_at_the_64_bit_edge(http: httpx.Client) -> None:
    key = "agent:numbers:main"
    http.put(f"/v1/sessions/{key}", json={})
    caller = {"X-Session-Key": key}
    ok = http.post("/v1/tools/session_status", json={"changesSince": MAX}, headers=caller)
    assert ok.status_code == 200 and ok.json()["stateChanges"]["events"] == []
    for since in (MAX + 1, 10**40):
        res = http.post("/v1/tools/session_status", json={"changesSince": since}, headers=caller)
        assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument", res.text
    # /v1/events?after=: every valid 19-digit value is fine; more, or non-ASCII digits, is not.
    assert http.get("/v1/events", params={"after": str(MAX)}).json() == {"events": []}
    assert http.get("/v1/events", params={"after": "1000000000000000000"}).status_code == 200
    for bad in (str(MAX + 1), "12345678901234567890", "\u0661\u0662", "\uff11", "\u0967"):
        res = http.get("/v1/events", params={"after": bad})
        assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument", (bad, res.text)


def test_blank_channel_over_http_is_via_unknown(http: httpx.Client) -> None:
    parent, label = "agent:blank:main", "kid"
    http.put(f"/v1/sessions/{parent}", json={})
    kid = http.post("/v1/tools/sessions_spawn", json={"label": label}, headers={"X-Session-Key": parent}).json()[
        "sessionKey"
    ]
    res = http.post(f"/v1/sessions/{kid}/inbound", json={"text": "hello", "channel": " "})
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    assert body["recorded"] is True and body["event"]["summary"] == "human message via unknown"


def test_client_refuses_a_gateway_url_without_scheme() -> None:
    for url in ("127.0.0.1:7878", "localhost", "ftp://x"):
        with pytest.raises(InvalidArgument, match="http:// or https://"):
            GatewayClient(url)
