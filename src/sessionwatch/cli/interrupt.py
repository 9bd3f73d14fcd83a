"""Ctrl-C for the live commands (``log --follow``, ``top``): the loop stops between its steps.

A ``KeyboardInterrupt`` raised at an arbitrary bytecode can land inside a library's locked section (rich's
refresh thread, a SQLite call, an HTTP read) and leave a lock held that the shutdown then waits on: seen
as a ``top`` or ``log --follow`` that did not exit within 10 s of SIGINT on a loaded machine. So while a
live loop runs, SIGINT only sets a flag the loop checks; a second Ctrl-C raises as usual, for a step that
hangs.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType, TracebackType

STEP_S = 0.05  # how often a wait looks at the flag


class StopOnInterrupt:
    """``with StopOnInterrupt() as stop: while not stop.wait(interval): ...``"""

    def __init__(self) -> None:
        self.stopped = False
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopped:
            raise KeyboardInterrupt  # the second Ctrl-C: the step in progress is stuck, stop it there
        self.stopped = True

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as Ctrl-C was pressed (at once if it already was)."""
        deadline = time.monotonic() + seconds
        while not self.stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(STEP_S, left))
        return self.stopped
