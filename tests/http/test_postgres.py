"""Two gateway processes sharing one PostgreSQL store: a wake recorded on one reaches an SSE stream on the other."""

from __future__ import annotations

import httpx
import pytest

from sessionwatch.notices import notice_text

from .sse_reader import SSEReader

pg = pytest.importorskip("tests.support.pg")
pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL not reachable")]


def test_wake_crosses_gateways_on_a_shared_store(gateway_factory) -> None:
    with pg.fresh_database() as url:
        a = gateway_factory(url).start()
        b = gateway_factory(url).start()
        manager = "agent:pg:main"
        with httpx.Client(base_url=a.url, timeout=10) as on_a, httpx.Client(base_url=b.url, timeout=10) as on_b:
            on_a.put(f"/v1/sessions/{manager}", json={})
            child = on_a.post(
                "/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": manager}
            ).json()
            reader = SSEReader(a.url, manager).start()
            try:
                # The person's message arrives through the other gateway.
                res = on_b.post(f"/v1/sessions/{child['sessionKey']}/inbound", json={"text": "hi", "channel": "web"})
                assert res.status_code == 200 and res.json()["recorded"] is True
                got = reader.next(5)
                assert got is not None, "no wake across gateways"
                assert got[2]["watcher"] == manager and got[2]["target"] == child["sessionKey"]
            finally:
                reader.close()
            queue = on_a.get(f"/v1/sessions/{manager}/system-events").json()["entries"]
            assert [e["text"] for e in queue] == [notice_text(child["sessionKey"], child["stateVersion"])]
            a.stop()
            b.stop()
