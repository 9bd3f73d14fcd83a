"""``GET /metrics``: a scenario on a real gateway, then the counters' exact values (Prometheus text format)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .sse_reader import SSEReader


def scrape(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of GET /metrics as {(name, sorted labels): value}."""
    res = http.get("/metrics")
    assert res.status_code == 200, res.text
    assert res.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(res.text)
        for s in fam.samples
    }


def test_a_scenario_counts_exactly(gateway_factory) -> None:
    gp = gateway_factory().start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        manager = "agent:metrics:main"
        assert http.put(f"/v1/sessions/{manager}", json={}).status_code == 200
        child = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": manager}).json()[
            "sessionKey"
        ]
        reader = SSEReader(gp.url, manager).start()
        try:
            assert scrape(http)[("sessionwatch_sse_subscribers", ())] == 1
            # The person writes to the child: one notice for the manager, one wake at once.
            http.post(f"/v1/sessions/{child}/inbound", json={"text": "one", "channel": "web"})
            assert reader.next(2) is not None
            # The manager drains: one delivered, one acknowledged.
            assert len(http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()["entries"]) == 1
            # Two more messages (the second while the first's notice is queued; the 20 s window coalesces
            # their wakes), then a drain: one delivered and acknowledged, and one reopen because the
            # child moved on after the notice was frozen.
            http.post(f"/v1/sessions/{child}/inbound", json={"text": "two", "channel": "web"})
            http.post(f"/v1/sessions/{child}/inbound", json={"text": "three", "channel": "web"})
            assert len(http.post(f"/v1/sessions/{manager}/system-events/drain", json={}).json()["entries"]) == 1
        finally:
            reader.close()
        m = scrape(http)

    def value(name: str, **labels: str) -> float:
        return m.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("sessionwatch_events_recorded_total", kind="created") == 1  # the spawned child's
    assert value("sessionwatch_events_recorded_total", kind="child_spawned") == 1
    assert value("sessionwatch_events_recorded_total", kind="human_direct_message") == 3
    assert sum(v for (n, _), v in m.items() if n == "sessionwatch_events_recorded_total") == 5
    assert value("sessionwatch_notices_queued_total") == 3  # each message made the pair stale
    assert value("sessionwatch_notices_delivered_total") == 2
    assert value("sessionwatch_notices_acknowledged_total") == 2
    assert value("sessionwatch_notices_reopened_total") == 1
    assert value("sessionwatch_wakes_sent_total", trailing="false") == 1
    assert value("sessionwatch_wakes_sent_total", trailing="true") == 0
    assert value("sessionwatch_recordings_dropped_total", cause="busy") == 0
    assert value("sessionwatch_store_operation_seconds_count", operation="record") == 5
    assert value("sessionwatch_store_operation_seconds_count", operation="acknowledge_leased") == 2
    assert value("sessionwatch_store_operation_seconds_sum", operation="record") > 0
    assert value("sessionwatch_up") == 1
    assert value("sessionwatch_sse_subscribers") in (0, 1)  # the stream's teardown may trail the scrape


def test_monitor_ticks_are_counted_and_timed(gateway_factory) -> None:
    gp = gateway_factory().start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        for _ in range(2):
            assert http.post("/v1/upstream/tick", json={}).status_code == 200
        m = scrape(http)
    assert m[("sessionwatch_monitor_ticks_total", (("status", "ok"),))] == 2
    assert m[("sessionwatch_monitor_tick_seconds_count", ())] == 2


def test_metrics_need_an_admin_token(gateway_factory) -> None:
    admin = "metrics-admin-token-0123456789"
    gp = gateway_factory(token=admin).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        assert http.get("/metrics").status_code == 401
        res = http.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
        assert res.status_code == 200 and "sessionwatch_up 1.0" in res.text


pg = pytest.importorskip("tests.support.pg")


@pytest.mark.postgres
@pytest.mark.skipif(not pg.available(), reason="PostgreSQL not reachable")
def test_postgres_pool_state(gateway_factory) -> None:
    with pg.fresh_database() as url:
        gp = gateway_factory(url).start()
        with httpx.Client(base_url=gp.url, timeout=10) as http:
            http.put("/v1/sessions/agent:pgm:main", json={})
            m = scrape(http)
        gp.stop()
    assert m[("sessionwatch_pg_pool_max", ())] >= 1
    assert 0 <= m[("sessionwatch_pg_pool_available", ())] <= m[("sessionwatch_pg_pool_size", ())]
    assert m[("sessionwatch_pg_pool_waiting", ())] == 0
    assert m[("sessionwatch_store_operation_seconds_count", (("operation", "put_session"),))] == 1
