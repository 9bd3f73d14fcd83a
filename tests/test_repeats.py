"""``RepeatedFailures``: a failure repeated per request is logged once with its traceback, then counted.
(The gateway's own log under a real full disk: tests/http/test_small_doors.py.)"""

from __future__ import annotations

import logging

import pytest

from sessionwatch.repeats import RepeatedFailures


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fail(log: RepeatedFailures, text: str, key: str) -> None:
    try:
        raise OSError(text)
    except OSError:
        log.exception("writing %s failed", key)


def test_once_with_the_traceback_then_counted(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RepeatedFailures(logging.getLogger("sessionwatch.test.repeats"), window_s=60, clock=clock)
    caplog.set_level(logging.INFO, "sessionwatch.test.repeats")
    for i in range(50):
        _fail(log, "disk is full", f"session-{i}")  # another session each time: still the same failure
        clock.now += 0.1
    assert [(r.message, r.exc_info is not None) for r in caplog.records] == [("writing session-0 failed", True)]

    caplog.clear()
    _fail(log, "database is locked", "session-x")  # the failure changed: the count of the first comes first
    assert [(r.message, r.exc_info is not None) for r in caplog.records] == [
        ("writing session-49 failed (repeated 49 more times in 5 s; logged once above)", False),
        ("writing session-x failed", True),
    ]

    caplog.clear()
    _fail(log, "disk is full", "session-50")  # reported 5 s ago: counted
    clock.now += 61
    _fail(log, "disk is full", "session-51")  # a window later: one line with the count, no traceback
    assert [(r.message, r.exc_info) for r in caplog.records] == [
        ("writing session-51 failed (repeated 2 more times in 61 s; logged once above)", None)
    ]

    caplog.clear()
    clock.now += 120
    _fail(log, "disk is full", "session-52")  # quiet for a whole window: logged in full again
    _fail(log, "disk is full", "session-53")
    log.flush(force=True)  # as the server stops
    assert [(r.message, r.exc_info is not None) for r in caplog.records] == [
        ("writing session-52 failed", True),
        ("writing session-53 failed (repeated 1 more time in 0 s; logged once above)", False),
    ]
