"""Millisecond clocks. Tests inject a ManualClock; timed work then runs only through run_due()."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def __call__(self) -> int: ...


def system_clock() -> int:
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now
