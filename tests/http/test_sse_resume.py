"""The wake stream across reconnects: ``id:`` and ``retry:``, and one wake at once for a pending notice."""

from __future__ import annotations

import httpx
import pytest

from .sse_reader import SSEReader


@pytest.mark.slow
def test_a_wake_stream_reconnecting_with_a_notice_pending_gets_exactly_one_wake(
    shared_gateway, http: httpx.Client
) -> None:
    manager = "agent:resume:main"
    assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
    child = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": manager}).json()[
        "sessionKey"
    ]

    first = SSEReader(shared_gateway.url, manager).start()
    try:
        assert first.retry is not None and first.retry > 0, "no retry: hint"
        assert first.next(0.5) is None, "a wake on connect while nothing is pending"
        assert http.post(f"/v1/sessions/{child}/inbound", json={"text": "hi", "channel": "web"}).status_code == 200
        got = first.next(2)
        assert got is not None and got[2]["target"] == child
        assert len(first.ids) == 1 and int(first.ids[0]) > 0
    finally:
        first.close()  # the connection drops; the notice stays queued (nobody drained it)

    # Reconnecting inside the 20 s coalescing window: the hub would not wake again, the stream does, once.
    again = SSEReader(shared_gateway.url, manager, headers={"Last-Event-ID": first.ids[0]}).start()
    try:
        wake = again.next(2)
        assert wake is not None, "no wake for the notice pending at reconnect"
        assert wake[1] == "wake" and wake[2]["watcher"] == manager and wake[2]["target"] == child
        assert wake[2]["trailing"] is False
        assert again.next(1.5) is None, "more than one wake for one pending notice"
        assert int(again.ids[0]) > int(first.ids[0])
    finally:
        again.close()

    # Once drained, a new connection gets no wake.
    assert http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).status_code == 200
    third = SSEReader(shared_gateway.url, manager).start()
    try:
        assert third.next(1.0) is None, "a wake on connect after the notice was drained"
    finally:
        third.close()
