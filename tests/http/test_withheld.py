"""The HTTP peek and drain of a full queue say how many more watched sessions changed (issue 19, item 3):
``withheld`` beside ``entries``, absent when nothing is held back. A real gateway process on loopback."""

from __future__ import annotations

import httpx

from sessionwatch.client import GatewayClient
from tests.http.conftest import GatewayProcess


def _manager_with_changed_children(http: httpx.Client, agent: str, children: int) -> str:
    manager = f"agent:{agent}:main"
    assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
    for i in range(children):
        spawned = http.post(
            "/v1/tools/sessions_spawn", json={"label": f"kid-{i:02d}"}, headers={"X-Session-Key": manager}
        ).json()
        res = http.post(f"/v1/sessions/{spawned['sessionKey']}/inbound", json={"text": "new plan", "channel": "web"})
        assert res.json()["recorded"]
    return manager


def test_peek_and_drain_of_a_full_queue_say_how_many_more(http: httpx.Client, shared_gateway: GatewayProcess) -> None:
    manager = _manager_with_changed_children(http, "withheld30", 30)
    peek = http.get(f"/v1/sessions/{manager}/system-events").json()
    assert len(peek["entries"]) == 20 and peek["withheld"] == 10
    with GatewayClient(shared_gateway.url) as client:
        assert client.withheld_notices(manager) == 10
        assert client.withheld_notices(manager, shown=[]) == 0  # nothing shown: nothing asked
    drained = http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()
    assert len(drained["entries"]) == 20 and drained["withheld"] == 10
    # the drain took the full queue: the 10 evicted notices are queued again, and nothing is held back
    peek = http.get(f"/v1/sessions/{manager}/system-events").json()
    assert len(peek["entries"]) == 10 and "withheld" not in peek
    drained = http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()
    assert len(drained["entries"]) == 10 and "withheld" not in drained
    assert http.get(f"/v1/sessions/{manager}/system-events").json() == {"entries": []}


def test_a_queue_of_twenty_has_no_withheld(http: httpx.Client) -> None:
    manager = _manager_with_changed_children(http, "withheld20", 20)
    peek = http.get(f"/v1/sessions/{manager}/system-events").json()
    assert len(peek["entries"]) == 20 and "withheld" not in peek
    drained = http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()
    assert len(drained["entries"]) == 20 and "withheld" not in drained
