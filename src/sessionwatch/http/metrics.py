"""``GET /metrics``: the gateway's metrics in the Prometheus text format (prometheus-client).

Each app has its own ``CollectorRegistry`` (never the process-global one), so several gateways in one
process (tests) keep separate counts. The engine reports through ``engine.observe.Observer``;
:class:`PrometheusObserver` turns those calls into counters and histograms. What is cheaper to read at
scrape time than to count (dropped recordings, SSE subscribers, the PostgreSQL pool) is read by a
collector when Prometheus scrapes. The list with meanings is in docs/operations.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.responses import Response

from ..engine.drops import CAUSES
from ..engine.observe import Observer
from ..kinds import LIFECYCLE_STATES
from ..repeats import RepeatedFailures
from .auth import ADMIN_ONLY
from .endpoints import Call, Endpoint
from .runtime import Runtime

NS = "sessionwatch"
log = RepeatedFailures(logging.getLogger("sessionwatch.http.metrics"))
# Store operations take from tens of microseconds (a cached read) to seconds (a locked SQLite file).
STORE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class PrometheusObserver(Observer):
    """Engine hooks -> prometheus-client metrics in ``registry``."""

    times_store = True
    counts_notices = True

    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            f"{NS}_events_recorded", "Events recorded into the signal log, by kind.", ["kind"], registry=registry
        )
        self.queued = Counter(
            f"{NS}_notices_queued",
            "Stale notices raised by recordings: (explicit watcher, target) pairs a recording made stale.",
            registry=registry,
        )
        self.delivered = Counter(
            f"{NS}_notices_delivered",
            "Queue entries delivered to a client and taken off the queue (drain, or peek then ack).",
            registry=registry,
        )
        self.acknowledged = Counter(
            f"{NS}_notices_acknowledged",
            "Stale notices acknowledged (the watcher's cursor moved to the notice's watermark).",
            registry=registry,
        )
        self.reopened = Counter(
            f"{NS}_notices_reopened",
            "Notices queued again by an acknowledgment because the target moved on after the notice was frozen.",
            registry=registry,
        )
        self.wakes = Counter(
            f"{NS}_wakes_sent",
            "Wakes sent to subscribed watchers (one per wake, however many streams a watcher has open).",
            ["trailing"],
            registry=registry,
        )
        self.store_seconds = Histogram(
            f"{NS}_store_operation_seconds",
            "Store operation latency, by operation.",
            ["operation"],
            buckets=STORE_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            f"{NS}_store_operation_errors",
            "Store operations that raised, by operation.",
            ["operation"],
            registry=registry,
        )
        self.ticks = Counter(
            f"{NS}_monitor_ticks",
            "Upstream monitor ticks, by status (ok, error, aborted).",
            ["status"],
            registry=registry,
        )
        self.tick_seconds = Histogram(
            f"{NS}_monitor_tick_seconds", "Upstream monitor tick duration.", buckets=TICK_BUCKETS, registry=registry
        )
        self.provider_outcomes = Counter(
            f"{NS}_monitor_provider_outcomes",
            "Provider runs within monitor ticks, by provider (catalog) and outcome (ok, timeout, error, unavailable).",
            ["provider", "outcome"],
            registry=registry,
        )
        # Labelled children resolved once (lazily: only operations that ran show up), so a timing is one
        # lock and one add.
        self._store_children: dict[str, Any] = {}
        self._wake_children = {False: self.wakes.labels("false"), True: self.wakes.labels("true")}
        self._event_children: dict[str, Any] = {}

    def event_recorded(self, kind: str) -> None:
        child = self._event_children.get(kind)
        if child is None:
            child = self._event_children[kind] = self.events.labels(kind)
        child.inc()

    def notices_queued(self, n: int) -> None:
        if n:
            self.queued.inc(n)

    def notices_delivered(self, n: int) -> None:
        if n:
            self.delivered.inc(n)

    def notices_acknowledged(self, n: int) -> None:
        if n:
            self.acknowledged.inc(n)

    def notices_reopened(self, n: int) -> None:
        if n:
            self.reopened.inc(n)

    def wake_sent(self, trailing: bool, subscribers: int) -> None:
        self._wake_children[bool(trailing)].inc()

    def store_op(self, op: str, seconds: float, ok: bool) -> None:
        child = self._store_children.get(op)
        if child is None:
            child = self._store_children[op] = self.store_seconds.labels(op)
        child.observe(seconds)
        if not ok:
            self.store_errors.labels(op).inc()

    def monitor_tick(self, result: dict[str, Any], seconds: float) -> None:
        self.ticks.labels(str(result.get("status", "ok"))).inc()
        self.tick_seconds.observe(seconds)
        for info in result.get("providers", ()):
            self.provider_outcomes.labels(str(info.get("catalogId")), str(info.get("status", "ok"))).inc()


class ScrapeTimeCollector(Collector):
    """Values read when Prometheus scrapes: dropped recordings, SSE subscribers, sessions per lifecycle
    state, the PostgreSQL pool."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Any]:
        gw = self.runtime.gateway
        dropped = CounterMetricFamily(
            f"{NS}_recordings_dropped",
            "Recordings the store refused (best-effort: the action went on), by cause.",
            labels=["cause"],
        )
        counts = gw.drops.to_json()["byCause"] if gw is not None else {}
        for cause in (*CAUSES, *sorted(set(counts) - set(CAUSES))):
            dropped.add_metric([cause], counts.get(cause, 0))
        yield dropped
        yield GaugeMetricFamily(
            f"{NS}_sse_subscribers", "Open Server-Sent Events streams.", value=len(self.runtime.streams)
        )
        yield GaugeMetricFamily(
            f"{NS}_up",
            "1 when the gateway's store is open and its restart sweep has run.",
            value=1 if gw is not None and self.runtime.state == "ok" and gw.sweep_ran else 0,
        )
        states = self._lifecycle_counts(gw)
        if states is not None:
            gauge = GaugeMetricFamily(
                f"{NS}_sessions_lifecycle",
                "Sessions in each lifecycle state (working, waiting, idle, ended, lost); "
                "sessions that never reported one are not counted.",
                labels=["state"],
            )
            for state in LIFECYCLE_STATES:
                gauge.add_metric([state], states.get(state, 0))
            yield gauge
        pool = getattr(getattr(gw, "store", None), "_pool", None) if gw is not None else None
        stats = getattr(pool, "get_stats", None)
        if callable(stats):
            values = stats()
            for name, key, doc in (
                ("size", "pool_size", "Connections in the PostgreSQL pool (busy or idle)."),
                ("available", "pool_available", "Idle connections in the PostgreSQL pool."),
                ("max", "pool_max", "The PostgreSQL pool's maximum size."),
                ("waiting", "requests_waiting", "Requests waiting for a PostgreSQL connection."),
            ):
                yield GaugeMetricFamily(f"{NS}_pg_pool_{name}", doc, value=values.get(key, 0))
            yield CounterMetricFamily(
                f"{NS}_pg_pool_timeouts",
                "Requests that timed out waiting for a PostgreSQL connection.",
                value=values.get("requests_errors", 0),
            )

    @staticmethod
    def _lifecycle_counts(gw: Any) -> dict[str, int] | None:
        """One grouped count (the scrape runs off the event loop); None when it cannot be read: the
        gauge is left out of that scrape rather than showing zeros."""
        if gw is None:
            return None
        try:
            counts: dict[str, int] = gw.store.lifecycle_counts()
        except Exception as exc:  # noqa: BLE001 - a scrape never fails for one gauge (logged once)
            log.warning("reading the lifecycle counts for /metrics failed: %s", exc, per="lifecycle-counts")
            return None
        return counts


class Metrics:
    """One app's registry and observer; ``attach(gw)`` makes an open Gateway report to it."""

    def __init__(self, runtime: Runtime) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.observer = PrometheusObserver(self.registry)
        self.registry.register(ScrapeTimeCollector(runtime))

    def attach(self, gw: Any) -> None:
        set_observer = getattr(gw, "set_observer", None)
        if callable(set_observer):
            set_observer(self.observer)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def routes(metrics: Metrics) -> list[Endpoint]:
    def scrape(c: Call) -> Response:  # on a worker thread: the lifecycle gauge reads the store
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return [
        Endpoint(
            "GET",
            "/metrics",
            "metrics",
            "Prometheus metrics (text exposition format).",
            scrape,
            tag="meta",
            needs_gateway=False,
            touches=ADMIN_ONLY,
            description="Admin tokens only (a tokenless loopback gateway serves it to anyone who can "
            "connect). The metrics are listed in docs/operations.md.",
        )
    ]
