"""Wakes over Server-Sent Events: immediate first wake, coalescing, keep-alives, disconnects, shutdown."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.support.waiting import wait_until

from .sse_reader import SSEReader

WINDOW_MS = 1500


def _manager_with_child(http: httpx.Client, agent: str) -> tuple[str, str]:
    manager = f"agent:{agent}:main"
    assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
    res = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": manager})
    return manager, res.json()["sessionKey"]


def _human(http: httpx.Client, key: str, text: str = "hey") -> None:
    assert http.post(f"/v1/sessions/{key}/inbound", json={"text": text, "channel": "web"}).status_code == 200


@pytest.mark.slow
def test_first_wake_immediate_then_one_trailing_wake(gateway_factory) -> None:
    gp = gateway_factory(env={"SESSIONWATCH_WAKE_COALESCE_MS": str(WINDOW_MS)}).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        manager, child = _manager_with_child(http, "sse")
        reader = SSEReader(gp.url, manager).start()
        try:
            sent = time.monotonic()
            _human(http, child)
            first = reader.next(2)
            assert first is not None, "no immediate wake"
            at, event, wake = first
            assert event == "wake" and at - sent < 1.0
            assert wake["watcher"] == manager and wake["target"] == child and wake["trailing"] is False
            assert wake["reason"] == f"session-state:{child}" and isinstance(wake["at"], int)

            # Ack, then a new notice inside the window: no immediate wake, one trailing wake at its end.
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            _human(http, child, "again")
            _human(http, child, "and again")
            assert reader.next(0.5) is None, "a second wake inside the coalescing window was not coalesced"
            trailing = reader.next(3)
            assert trailing is not None, "no trailing wake"
            assert trailing[2]["trailing"] is True and trailing[2]["target"] == child
            assert WINDOW_MS / 1000 * 0.8 <= trailing[0] - at <= WINDOW_MS / 1000 + 1.5
            assert reader.next(WINDOW_MS / 1000 + 0.5) is None, "more than one trailing wake"

            # The drain acknowledges up to the frozen watermark and reopens once ("and again" came after
            # the notice froze); the window of the trailing wake is over, so that reopen wakes at once.
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            reopen = reader.next(2)
            assert reopen is not None and reopen[2]["trailing"] is False
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})

            # A pending notice drained before the window ends produces no trailing wake at all.
            time.sleep(WINDOW_MS / 1000 + 0.1)  # the coalescing window passes: the clock is the subject here
            _human(http, child, "fresh window")
            fresh = reader.next(2)
            assert fresh is not None and fresh[2]["trailing"] is False
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            _human(http, child, "inside window, drained at once")
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
            assert reader.next(WINDOW_MS / 1000 + 0.7) is None, "a trailing wake without a pending notice"
        finally:
            reader.close()


def test_default_window_coalesces_second_wake(shared_gateway, http: httpx.Client) -> None:
    manager, child = _manager_with_child(http, "ssedefault")
    reader = SSEReader(shared_gateway.url, manager).start()
    try:
        _human(http, child)
        assert reader.next(2) is not None
        http.post(f"/v1/sessions/{manager}/system-events/drain", json={})
        _human(http, child, "second, within 20 s")
        assert reader.next(1.0) is None
    finally:
        reader.close()


def test_every_subscriber_of_a_watcher_gets_the_wake_and_others_do_not(shared_gateway, http: httpx.Client) -> None:
    manager, child = _manager_with_child(http, "ssemany")
    other, _ = _manager_with_child(http, "sseother")
    readers = [SSEReader(shared_gateway.url, manager).start() for _ in range(3)]
    bystanders = [SSEReader(shared_gateway.url, other).start() for _ in range(2)]
    try:
        _human(http, child)
        for r in readers:
            got = r.next(2)
            assert got is not None and got[2]["watcher"] == manager
        for r in bystanders:
            assert r.next(0.2) is None
    finally:
        for r in readers + bystanders:
            r.close()


def test_disconnect_unsubscribes(shared_gateway, http: httpx.Client) -> None:
    readers = [SSEReader(shared_gateway.url, f"agent:ssedisc:w{i}").start() for i in range(5)]
    assert http.get("/v1/health").json()["streams"] >= 5
    for r in readers:
        r.close()
    wait_until(lambda: http.get("/v1/health").json()["streams"] == 0, timeout=3, what="no stream left")


def test_keepalive_comments(gateway_factory) -> None:
    gp = gateway_factory(extra_args=["--keepalive", "0.2"]).start()
    reader = SSEReader(gp.url, "agent:ka:main").start()
    try:
        wait_until(
            lambda: sum(c == ": keep-alive" for c in reader.comments) >= 2,
            timeout=0.9,  # every 0.2 s
            what="two keep-alives",
        )
        assert reader.comments[0].startswith(": subscribed")
    finally:
        reader.close()


@pytest.mark.parametrize(
    "query", [{}, {"sessionKey": "global"}, {"sessionKey": "not a key"}, {"sessionKey": "agent::x"}]
)
def test_stream_refuses_bad_keys(http: httpx.Client, query: dict[str, str]) -> None:
    res = http.get("/v1/stream", params=query)
    assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument"


@pytest.mark.slow
def test_sigterm_ends_streams_and_finishes_in_flight_requests(gateway_factory) -> None:
    gp = gateway_factory().start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        a, b = "agent:term:main", "agent:term:other"
        http.put(f"/v1/sessions/{a}", json={})
        http.put(f"/v1/sessions/{b}", json={})
        readers = [SSEReader(gp.url, a).start() for _ in range(3)]
        import threading

        result: dict[str, httpx.Response] = {}

        def waiting_send() -> None:
            with httpx.Client(base_url=gp.url, timeout=10) as c:
                result["res"] = c.post(
                    "/v1/tools/sessions_send",
                    json={"sessionKey": b, "message": "hi", "timeoutSeconds": 1.5},
                    headers={"X-Session-Key": a},
                )

        t = threading.Thread(target=waiting_send)
        t.start()
        # In flight once its message is in b's transcript (then it waits for a reply that never comes).
        wait_until(
            lambda: (
                '"hi"'
                in http.post("/v1/tools/sessions_history", json={"sessionKey": b}, headers={"X-Session-Key": a}).text
            ),
            what="the send in flight",
        )
        started = time.monotonic()
        assert gp.proc is not None
        gp.proc.send_signal(signal.SIGTERM)
        gp.proc.wait(15)
        elapsed = time.monotonic() - started
        t.join(5)
        assert elapsed < 6, f"shutdown took {elapsed:.1f} s"
        assert all(r.ended.wait(3) for r in readers), "SSE streams were not ended"
        # The in-flight waiting send was allowed to finish (no reply came: status timeout).
        assert result["res"].status_code == 200 and result["res"].json()["status"] == "timeout"
        for r in readers:
            r.close()
    # The store was closed cleanly: a new gateway opens it and sees the sessions.
    again = gateway_factory(gp.store_url).start()
    assert httpx.get(f"{again.url}/v1/sessions/{a}").status_code == 200


def test_gateway_client_stream_wakes(shared_gateway, http: httpx.Client) -> None:
    import threading

    from sessionwatch.client import GatewayClient

    manager, child = _manager_with_child(http, "sseclient")
    got: list[dict] = []
    with GatewayClient(shared_gateway.url) as client:

        def consume() -> None:
            for wake in client.stream_wakes(manager, timeout=5):
                got.append(wake)
                return  # closing the generator closes the stream

        t = threading.Thread(target=consume)
        t.start()
        wait_until(lambda: http.get("/v1/health").json()["streams"] >= 1, timeout=5, what="the stream subscribed")
        _human(http, child)
        t.join(5)
        assert got and got[0]["watcher"] == manager and got[0]["target"] == child and got[0]["trailing"] is False
        with pytest.raises(Exception) as err:
            next(client.stream_wakes("global"))
        assert getattr(err.value, "code", None) == "invalid_argument"
