"""What the engine reports about itself, for metrics and traces, without knowing who listens.

The engine calls an :class:`Observer` at a few points (a recording, a drain or ack, a wake, a monitor
tick, a store operation). The default does nothing, so the engine stays free of any metrics library;
the HTTP face installs one that feeds prometheus-client (``http/metrics.py``). ``TimedStore`` wraps a
store by delegation, so store backends are not edited to be timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..store.base import Store


class Observer:
    """No-op hooks; override what you need. Hooks run on the engine's threads: keep them short."""

    times_store = False  # True: the engine wraps its store in TimedStore and reports every operation
    counts_notices = False  # True: recordings ask the store for the pairs they made stale (one cheap query)

    def event_recorded(self, kind: str) -> None: ...

    def recording_dropped(self, cause: str) -> None: ...

    def notices_queued(self, n: int) -> None: ...

    def notices_delivered(self, n: int) -> None: ...

    def notices_acknowledged(self, n: int) -> None: ...

    def notices_reopened(self, n: int) -> None: ...

    def wake_sent(self, trailing: bool, subscribers: int) -> None: ...

    def store_op(self, op: str, seconds: float, ok: bool) -> None: ...

    def monitor_tick(self, result: dict[str, Any], seconds: float) -> None: ...


NULL = Observer()

# The Store methods that are timed: every operation of the interface (store/base.py).
TIMED_OPS = tuple(sorted(Store.__abstractmethods__ | {"poll_wakes"}))


class TimedStore:
    """A Store seen through a stopwatch: each interface method reports (name, seconds, ok) to an observer.

    Attributes that are not interface methods (``url``, ``path``, ``_pool``, ...) are the inner store's."""

    def __init__(self, inner: Store, observer: Observer) -> None:
        self.inner = inner
        for op in TIMED_OPS:
            method = getattr(inner, op, None)
            if method is not None:
                setattr(self, op, _timed(op, method, observer))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _timed(op: str, method: Callable[..., Any], observer: Observer) -> Callable[..., Any]:
    clock = time.perf_counter
    report = observer.store_op

    def call(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            result = method(*args, **kwargs)
        except BaseException:
            report(op, clock() - started, False)
            raise
        report(op, clock() - started, True)
        return result

    call.__name__ = op
    return call


class Tracer(Protocol):
    """Spans around tool calls and store operations (OpenTelemetry when enabled: sessionwatch/tracing.py,
    which needs nothing of the engine: anything with this method is a tracer)."""

    def span(self, name: str, attributes: dict[str, Any]) -> AbstractContextManager[Any]: ...


class SpanStore:
    """A Store whose interface methods each run inside a span ``store.<operation>``."""

    def __init__(self, inner: Any, tracer: Tracer) -> None:
        self.inner = inner
        for op in TIMED_OPS:
            method = getattr(inner, op, None)
            if method is not None:
                setattr(self, op, _spanned(op, method, tracer))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _spanned(op: str, method: Callable[..., Any], tracer: Tracer) -> Callable[..., Any]:
    name = f"sessionwatch.store.{op}"
    attributes = {"sessionwatch.store.operation": op}

    def call(*args: Any, **kwargs: Any) -> Any:
        with tracer.span(name, attributes):
            return method(*args, **kwargs)

    call.__name__ = op
    return call
