"""Wake delivery: coalesced per watcher within a window, pushed to whoever subscribed.

The first wake for a watcher is delivered at once; further requests within the window collapse into
one trailing wake at the end of it, delivered only if a notice is still pending then. A delivered
trailing wake opens a new window.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..repeats import RepeatedFailures
from ..store.records import WakeRequest
from .observe import NULL, Observer

log = logging.getLogger("sessionwatch.wakes")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


@dataclass(frozen=True, slots=True)
class Wake:
    watcher: str
    target: str
    reason: str
    at: int
    trailing: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "watcher": self.watcher,
            "target": self.target,
            "reason": self.reason,
            "at": self.at,
            "trailing": self.trailing,
        }


WakeCallback = Callable[[Wake], None]


class Subscription:
    """Returned by ``subscribe_wakes``; call it (or ``close()``) to unsubscribe."""

    def __init__(self, hub: WakeHub, watcher: str, callback: WakeCallback) -> None:
        self._hub, self.watcher, self.callback = hub, watcher, callback
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._hub._remove(self)

    __call__ = close

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WakeHub:
    def __init__(
        self,
        clock: Callable[[], int],
        window_ms: int,
        still_pending: Callable[[str], bool],
        on_schedule: Callable[[], None] = lambda: None,
    ) -> None:
        self._clock = clock
        self._window = window_ms
        self._still_pending = still_pending
        self._on_schedule = on_schedule
        self._lock = threading.Lock()
        self._subs: dict[str, list[Subscription]] = {}
        self._last: dict[str, int] = {}
        self._trailing: dict[str, tuple[int, str]] = {}
        self.observer: Observer = NULL

    def subscribe(self, watcher: str, callback: WakeCallback) -> Subscription:
        sub = Subscription(self, watcher, callback)
        with self._lock:
            self._subs.setdefault(watcher, []).append(sub)
        return sub

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get(sub.watcher, [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self._subs.pop(sub.watcher, None)
                self._trailing.pop(sub.watcher, None)

    def has_subscribers(self) -> bool:
        return bool(self._subs)

    def watchers(self) -> list[str]:
        with self._lock:
            return list(self._subs)

    def request(self, wakes: list[WakeRequest]) -> None:
        if not wakes or not self._subs:
            return
        now = self._clock()
        deliver: list[Wake] = []
        scheduled = False
        with self._lock:
            for req in wakes:
                if req.watcher not in self._subs:
                    continue
                last = self._last.get(req.watcher)
                if last is None or now - last >= self._window:
                    self._last[req.watcher] = now
                    self._trailing.pop(req.watcher, None)
                    deliver.append(Wake(req.watcher, req.target, f"session-state:{req.target}", now))
                else:
                    due = self._trailing.get(req.watcher, (last + self._window, ""))[0]
                    self._trailing[req.watcher] = (due, req.target)
                    scheduled = True
        for wake in deliver:
            self._deliver(wake)
        if scheduled:
            self._on_schedule()

    def next_due(self) -> int | None:
        with self._lock:
            return min((due for due, _ in self._trailing.values()), default=None)

    def run_due(self, now: int) -> int:
        with self._lock:
            due = [(w, t) for w, (at, t) in self._trailing.items() if at <= now]
            for w, _ in due:
                del self._trailing[w]
        delivered = 0
        for watcher, target in due:
            if not self._still_pending(watcher):
                continue
            with self._lock:
                self._last[watcher] = now
            self._deliver(Wake(watcher, target, f"session-state:{target}", now, trailing=True))
            delivered += 1
        return delivered

    def _deliver(self, wake: Wake) -> None:
        with self._lock:
            subs = list(self._subs.get(wake.watcher, ()))
        self.observer.wake_sent(wake.trailing, len(subs))
        for sub in subs:
            try:
                sub.callback(wake)
            except Exception:  # noqa: BLE001 - a subscriber's failure must not affect recording
                failure_log.exception("wake subscriber for %s failed", wake.watcher)
