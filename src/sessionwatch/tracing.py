"""Optional OpenTelemetry traces: spans around tool calls and store operations.

Off by default. ``SESSIONWATCH_OTEL=1`` turns them on in any process that opens a Gateway, when the
``otel`` extra is installed (``pip install -e '.[otel]'`` in a clone); otherwise a warning says why not.
sessionwatch only creates spans through the OpenTelemetry API: where they go (OTLP, console, ...) is
the process's tracer provider, configured as usual (``opentelemetry-instrument`` or your own setup).
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import Any

log = logging.getLogger("sessionwatch.tracing")


class OtelTracer:
    """Spans from an OpenTelemetry tracer (of ``provider``, else the process's global provider): a
    ``Tracer`` of the engine by its one method, so this module needs nothing of the engine."""

    def __init__(self, provider: Any = None) -> None:
        from opentelemetry import trace

        self._tracer = trace.get_tracer("sessionwatch", tracer_provider=provider)

    def span(self, name: str, attributes: dict[str, Any]) -> AbstractContextManager[Any]:
        return self._tracer.start_as_current_span(name, attributes=attributes)


def otel_tracer(provider: Any = None) -> OtelTracer | None:
    """An OtelTracer, or None (with a warning) when OpenTelemetry is not installed."""
    try:
        return OtelTracer(provider)
    except ImportError as exc:
        log.warning(
            "SESSIONWATCH_OTEL is set but OpenTelemetry is not installed (pip install -e '.[otel]' in a clone): %s", exc
        )
        return None
