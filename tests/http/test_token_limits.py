"""No token can deny service to another (issue 19, item 4), against real gateways on loopback.

- one scoped token opening as many streams as the server has connections gets its own share and 429
  with Retry-After beyond it; another token and the admin are served meanwhile;
- the same for requests in progress (sessions_send waiting for a reply holds one open);
- revoking a token ends its open streams on every gateway of the store within the revocation poll, and
  its MCP sessions on the MCP transport; an admin's stream stays open.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sessionwatch.store import open_store
from sessionwatch.tokens import create_token, revoke_token
from tests.mcp.helpers import mcp_http_server
from tests.support.waiting import wait_until

from .sse_reader import SSEReader

ADMIN = "token-limits-admin-token-0123456789"


def _token(store_url: str, agent: str) -> tuple[str, str]:
    store = open_store(store_url)
    try:
        text, row = create_token(store, agents=[agent])
        return text, row.token_id
    finally:
        store.close()


def _revoke(store_url: str, token_id: str) -> float:
    store = open_store(store_url)
    try:
        assert revoke_token(store, token_id)
    finally:
        store.close()
    return time.monotonic()


class RawStream:
    """``GET /v1/stream`` on its own socket: the status, and the socket held open (the stream with it)."""

    def __init__(self, port: int, token: str, key: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.sock.sendall(
            f"GET /v1/stream?sessionKey={key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.sock.recv(65536)
            assert chunk, "the connection closed before an answer"
            data += chunk
        head, _, self.rest = data.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])
        self.headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
        }

    def body(self) -> dict:
        length = int(self.headers[b"content-length"])
        while len(self.rest) < length:
            self.rest += self.sock.recv(65536)
        return json.loads(self.rest[:length])  # type: ignore[no-any-return]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def streams() -> Iterator[list[RawStream]]:
    held: list[RawStream] = []
    yield held
    for s in held:
        s.close()


def test_one_token_with_many_streams_cannot_lock_out_the_others(gateway_factory, streams: list[RawStream]) -> None:
    """What was measured: one scoped token held every connection with SSE streams and every other
    client, admin included, got 503. Here the cap is 100 connections and the token tries 100 streams."""
    gp = gateway_factory(token=ADMIN, extra_args=["--max-connections", "100"]).start()
    greedy, _ = _token(gp.store_url, "a")
    other, _ = _token(gp.store_url, "b")
    for i in range(100):
        streams.append(RawStream(gp.port, greedy, f"agent:a:w{i}"))
    opened = [s for s in streams if s.status == 200]
    refused = [s for s in streams if s.status != 200]
    # 100 connections, 50 for scoped tokens together (the admin reserve is 100, at most half the cap),
    # one token at most half of those: 25 streams
    assert len(opened) == 25, [s.status for s in streams]
    assert {s.status for s in refused} == {429}
    answer = refused[0].body()
    assert answer["error"]["code"] == "rate_limited" and answer["error"]["retryAfter"] == 10
    assert refused[0].headers[b"retry-after"] == b"10"

    # everyone else is served while the 25 streams (and 75 refused connections) stay open
    mine = RawStream(gp.port, other, "agent:b:w")
    streams.append(mine)
    assert mine.status == 200
    for token in (other, ADMIN):
        res = httpx.put(f"{gp.url}/v1/sessions/agent:b:main", json={}, headers={"Authorization": f"Bearer {token}"})
        assert res.status_code == 200, res.text
    assert httpx.get(f"{gp.url}/v1/health/ready", timeout=10).status_code == 200

    # the token's slots come back as its streams end
    opened[0].close()
    wait_until(
        lambda: RawStream(gp.port, greedy, "agent:a:again").status == 200, timeout=10, what="a freed stream slot"
    )


def test_requests_in_progress_are_limited_per_token(gateway_factory) -> None:
    gp = gateway_factory(token=ADMIN, extra_args=["--max-token-connections", "3"]).start()
    greedy, _ = _token(gp.store_url, "a")
    other, _ = _token(gp.store_url, "b")
    admin = httpx.Client(base_url=gp.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
    for key in ("agent:a:main", "agent:a:kid", "agent:b:main"):
        admin.put(f"/v1/sessions/{key}", json={}).raise_for_status()
    as_greedy = {"Authorization": f"Bearer {greedy}", "X-Session-Key": "agent:a:main"}
    ask = {"sessionKey": "agent:a:kid", "message": "well?", "timeoutSeconds": 60}
    answers: list[int] = []

    def wait_for_reply() -> None:  # holds a request in progress until the kid answers
        res = httpx.post(f"{gp.url}/v1/tools/sessions_send", json=ask, headers=as_greedy, timeout=90)
        answers.append(res.status_code)

    waiting = [threading.Thread(target=wait_for_reply) for _ in range(3)]
    for t in waiting:
        t.start()
    own = {"Authorization": f"Bearer {greedy}"}

    def all_three_waiting() -> bool:  # each appends its message before it waits: then it holds its slot
        history = admin.post(
            "/v1/tools/sessions_history",
            json={"sessionKey": "agent:a:kid"},
            headers={"X-Session-Key": "agent:a:main"},
        ).json()
        return sum(1 for m in history["messages"] if m["text"] == "well?") == 3

    wait_until(all_three_waiting, timeout=20, what="three sessions_send calls waiting for the reply")
    assert answers == []
    refused = httpx.get(f"{gp.url}/v1/sessions/agent:a:main", headers=own, timeout=10)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limited" and refused.headers["retry-after"] == "1"
    # another token and the admin are not affected
    assert (
        httpx.get(f"{gp.url}/v1/sessions/agent:b:main", headers={"Authorization": f"Bearer {other}"}).status_code == 200
    )
    assert admin.get("/v1/sessions/agent:a:main").status_code == 200
    admin.post("/v1/sessions/agent:a:kid/messages", json={"role": "assistant", "text": "here"}).raise_for_status()
    for t in waiting:
        t.join(30)
    assert answers == [200, 200, 200]
    assert httpx.get(f"{gp.url}/v1/sessions/agent:a:main", headers=own).status_code == 200
    admin.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One store for two gateways: a SQLite file, or a PostgreSQL database (the scale-out set-up)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shared.db"
        return
    from tests.support import pg

    if not pg.available():
        pytest.skip("PostgreSQL is not reachable")
    with pg.fresh_database() as url:
        yield url


def test_revoking_a_token_ends_its_streams_on_every_gateway(gateway_factory, shared_store: str) -> None:
    store_url = shared_store
    first = gateway_factory(store_url, token=ADMIN).start()  # the default poll: 2 s
    second = gateway_factory(store_url, token=ADMIN, extra_args=["--revocation-poll", "0.5"]).start()
    token, token_id = _token(store_url, "a")
    auth = {"Authorization": f"Bearer {token}"}
    httpx.put(f"{first.url}/v1/sessions/agent:a:main", json={}, headers=auth).raise_for_status()
    wakes_1 = SSEReader(first.url, "agent:a:main", headers=auth).start()
    wakes_2 = SSEReader(second.url, "agent:a:main", headers=auth).start()
    admins = SSEReader(first.url, "agent:a:main", headers={"Authorization": f"Bearer {ADMIN}"}).start()
    ended: dict[str, float] = {}

    def follow_log() -> None:  # the log stream of the second gateway, read until it ends
        with httpx.stream(
            "GET", f"{second.url}/v1/events/stream", headers=auth, timeout=httpx.Timeout(10, read=None)
        ) as res:
            assert res.status_code == 200
            for _ in res.iter_raw():
                pass
        ended["log"] = time.monotonic()

    log_reader = threading.Thread(target=follow_log, daemon=True)
    log_reader.start()
    wait_until(lambda: _streams(second) >= 2, timeout=10, what="both streams open on the second gateway")
    revoked_at = _revoke(store_url, token_id)

    def note_ends() -> bool:
        for name, reader in (("first", wakes_1), ("second", wakes_2)):
            if reader.ended.is_set():
                ended.setdefault(name, time.monotonic())
        return len(ended) == 3

    wait_until(note_ends, timeout=5, interval=0.01, what=f"every stream of the revoked token ended (so far: {ended})")
    took = {k: round(v - revoked_at, 2) for k, v in ended.items()}
    print("streams ended after revoking (s):", took)
    assert took["first"] <= 5 and took["second"] <= 5 and took["log"] <= 5, took
    assert not admins.ended.is_set()  # an admin's stream on the same gateway stays open
    assert wakes_1.status == 200 and wakes_1.ended.is_set()
    # and the token is refused when it comes back
    again = httpx.get(f"{first.url}/v1/stream", params={"sessionKey": "agent:a:main"}, headers=auth, timeout=10)
    assert again.status_code == 401
    admins.close()


def _streams(gp) -> int:  # type: ignore[no-untyped-def]
    res = httpx.get(f"{gp.url}/v1/health", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    return int(res.json().get("streams", 0))


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@pytest.mark.slow
def test_revoking_a_token_ends_its_mcp_sessions(sqlite_url: str) -> None:
    token, token_id = _token(sqlite_url, "main")
    with mcp_http_server(sqlite_url, "--http-token", ADMIN) as (url, _):  # the default poll: 2 s
        auth = {"Authorization": f"Bearer {token}", **MCP_HEADERS}
        opened = httpx.post(url, json=INIT, headers=auth, timeout=10)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        with_session = {**auth, "Mcp-Session-Id": session}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert httpx.post(url, json=note, headers=with_session, timeout=10).status_code == 202
        ended = threading.Event()
        status: list[int] = []

        def listen() -> None:  # the session's server-to-client stream
            with httpx.stream("GET", url, headers=with_session, timeout=httpx.Timeout(10, read=None)) as res:
                status.append(res.status_code)
                for _ in res.iter_raw():
                    pass
            ended.set()

        threading.Thread(target=listen, daemon=True).start()
        wait_until(lambda: status, timeout=10, what="the session's stream open")
        assert status == [200]
        # the session works for the admin too (one session, any valid credential): the proof it exists
        tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        as_admin = {"Authorization": f"Bearer {ADMIN}", **MCP_HEADERS, "Mcp-Session-Id": session}
        assert httpx.post(url, json=tools, headers=as_admin, timeout=10).status_code == 200
        revoked_at = _revoke(sqlite_url, token_id)
        assert ended.wait(5), "the revoked token's MCP stream is still open after 5 s"
        print(f"MCP stream ended {time.monotonic() - revoked_at:.2f} s after the revoke")
        gone = httpx.post(url, json=tools, headers=as_admin, timeout=10)
        assert gone.status_code == 404, gone.text  # the session was terminated, not only its stream
        assert httpx.post(url, json=tools, headers=with_session, timeout=10).status_code == 401


@pytest.mark.slow
def test_the_mcp_transport_limits_streams_per_token(sqlite_url: str) -> None:
    token, _ = _token(sqlite_url, "main")
    other, _ = _token(sqlite_url, "main")
    with mcp_http_server(sqlite_url, "--http-token", ADMIN, "--max-token-streams", "1") as (url, _):
        opened: list[int] = []
        done = threading.Event()

        def session_stream(bearer: str) -> str:
            auth = {"Authorization": f"Bearer {bearer}", **MCP_HEADERS}
            sid = httpx.post(url, json=INIT, headers=auth, timeout=10).headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            httpx.post(url, json=note, headers={**auth, "Mcp-Session-Id": sid}, timeout=10)
            return sid

        first = session_stream(token)

        def hold() -> None:
            headers = {"Authorization": f"Bearer {token}", **MCP_HEADERS, "Mcp-Session-Id": first}
            with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10, read=None)) as res:
                opened.append(res.status_code)
                done.wait(20)

        threading.Thread(target=hold, daemon=True).start()
        wait_until(lambda: opened, timeout=10, what="the first stream open")
        second = session_stream(token)
        headers = {"Authorization": f"Bearer {token}", **MCP_HEADERS, "Mcp-Session-Id": second}
        refused = httpx.get(url, headers=headers, timeout=10)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "10", refused.text
        assert refused.json()["error"]["code"] == "rate_limited"
        # another token (of the same agent) has its own share
        third = session_stream(other)
        headers = {"Authorization": f"Bearer {other}", **MCP_HEADERS, "Mcp-Session-Id": third}
        with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10, read=None)) as res:
            assert res.status_code == 200
        done.set()
