"""Optional OpenTelemetry spans around tool calls and store operations (the ``otel`` extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionwatch import Gateway

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from sessionwatch.tracing import OtelTracer  # noqa: E402


def test_tool_calls_and_store_operations_are_spans(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Gateway.open(f"sqlite:///{tmp_path}/t.db") as gw:
        gw.put_session("agent:otel:main")
        assert exporter.get_finished_spans() == ()  # off by default
        gw.enable_tracing(OtelTracer(provider))
        out = gw.call_tool("sessions_list", {}, caller="agent:otel:main")
        assert "error" not in out
    spans = exporter.get_finished_spans()
    tool = [s for s in spans if s.name == "sessionwatch.tool.sessions_list"]
    assert len(tool) == 1 and tool[0].attributes["sessionwatch.caller"] == "agent:otel:main"
    store = [s for s in spans if s.name.startswith("sessionwatch.store.")]
    assert store, "no store spans"
    # the tool's store reads are children of the tool span
    assert any(s.parent is not None and s.parent.span_id == tool[0].context.span_id for s in store)


def test_the_environment_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/a.db") as gw:
        assert gw.tracer is None
    monkeypatch.setenv("SESSIONWATCH_OTEL", "1")
    with Gateway.open(f"sqlite:///{tmp_path}/b.db") as gw:
        assert isinstance(gw.tracer, OtelTracer)
        gw.put_session("agent:otel:main")  # works through the span layer
        assert gw.get_session("agent:otel:main")["sessionKey"] == "agent:otel:main"
