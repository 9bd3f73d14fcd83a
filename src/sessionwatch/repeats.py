"""A failure that repeats is logged once with its traceback, then counted, not logged once per request.

On a full disk every request fails the same way; a log line and a traceback for each (tens of thousands
of lines) bury the one line that says what is wrong, and fill the disk further. ``RepeatedFailures``
wraps a logger: the first occurrence of a failure is logged as usual (with the traceback for
``exception``); later ones are only counted, and one summary line says how many there were:

* when ``window_s`` (60 s) has passed since the failure was last reported and it happens again, or
  a timer finds repeats not yet reported;
* when a failure not seen before is logged through the same instance (the failure changed): the
  repeats of the others are summarized first, so the log keeps their order.

A failure is the message template (not its arguments: a session key differs per request; ``per`` may
name one that tells failures apart, such as the operation) with the exception's class and text. One
that stays quiet for a whole window and comes back is logged in full again. Repeats not yet reported
when the process exits are summarized then (``flush_all``, also at exit).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 60.0
_MAX_KEYS = 256  # distinct failures tracked per instance; the oldest is forgotten beyond that


@dataclass(slots=True)
class _Seen:
    level: int
    reported_at: float  # when the failure was last logged (in full or summarized)
    last_at: float
    repeats: int = 0  # occurrences since then, not logged
    last_message: str = ""


class RepeatedFailures:
    """Rate-limited failure logging for one logger (thread-safe)."""

    def __init__(
        self, logger: logging.Logger, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], _Seen] = {}
        self._timer: threading.Timer | None = None
        _INSTANCES.add(self)

    def exception(self, msg: str, *args: object, key: object = None, per: str = "") -> None:
        """Inside an ``except`` block (or with the exception as ``key``): log at ERROR, with the traceback
        the first time."""
        self._log(logging.ERROR, msg, args, key if key is not None else sys.exc_info()[1], True, per)

    def error(self, msg: str, *args: object, key: object = None, per: str = "") -> None:
        self._log(logging.ERROR, msg, args, key if key is not None else sys.exc_info()[1], False, per)

    def warning(self, msg: str, *args: object, key: object = None, per: str = "") -> None:
        self._log(logging.WARNING, msg, args, key if key is not None else sys.exc_info()[1], False, per)

    # -- the bookkeeping -----------------------------------------------------------------------------
    def _log(self, level: int, msg: str, args: tuple[object, ...], cause: object, trace: bool, per: str) -> None:
        if not self.logger.isEnabledFor(level):
            return
        kind = type(cause).__name__ if isinstance(cause, BaseException) else ""
        ident = (f"{msg}\0{per}", kind, _text(cause))
        now = self.clock()
        summaries: list[tuple[int, str]] = []
        full = False
        with self._lock:
            seen = self._seen.get(ident)
            if seen is None or (seen.repeats == 0 and now - seen.last_at >= self.window_s):
                summaries = self._take_summaries(now, force=True)  # the failure changed: report the others
                if len(self._seen) >= _MAX_KEYS and ident not in self._seen:
                    self._seen.pop(next(iter(self._seen)))
                self._seen[ident] = _Seen(level, now, now, last_message=_format(msg, args))
                full = True
            else:
                seen.repeats += 1
                seen.last_at = now
                seen.last_message = _format(msg, args)
                if now - seen.reported_at >= self.window_s:
                    summaries = [self._summary(seen, now)]
                else:
                    self._arm()
        for lvl, text in summaries:
            self.logger.log(lvl, "%s", text)
        if full:
            traceback = cause if trace and isinstance(cause, BaseException) else None
            self.logger.log(level, msg, *args, exc_info=traceback)

    def _summary(self, seen: _Seen, now: float) -> tuple[int, str]:
        span = now - seen.reported_at
        times = "time" if seen.repeats == 1 else "times"
        text = f"{seen.last_message} (repeated {seen.repeats} more {times} in {span:.0f} s; logged once above)"
        seen.repeats, seen.reported_at = 0, now
        return seen.level, text

    def _take_summaries(self, now: float, *, force: bool) -> list[tuple[int, str]]:
        return [
            self._summary(seen, now)
            for seen in self._seen.values()
            if seen.repeats and (force or now - seen.reported_at >= self.window_s)
        ]

    def _arm(self) -> None:
        """A timer reports repeats that nothing else would (the failure stopped, or nothing else failed)."""
        if self._timer is not None:
            return
        self._timer = threading.Timer(self.window_s, self.flush)
        self._timer.daemon = True
        self._timer.start()

    def flush(self, *, force: bool = False) -> None:
        """Log the summaries that are due (every one with ``force``)."""
        with self._lock:
            if self._timer is not None and self._timer is not threading.current_thread():
                self._timer.cancel()  # flushed early (at exit, or as the server stops)
            self._timer = None
            summaries = self._take_summaries(self.clock(), force=force)
            if any(seen.repeats for seen in self._seen.values()):
                self._arm()
        for lvl, text in summaries:
            self.logger.log(lvl, "%s", text)


_INSTANCES: weakref.WeakSet[RepeatedFailures] = weakref.WeakSet()


def flush_all() -> None:
    """Summarize every repeat not yet reported (a server calls it as it stops; it also runs at exit)."""
    for instance in list(_INSTANCES):
        instance.flush(force=True)


atexit.register(flush_all)


def _text(cause: object) -> str:
    return "" if cause is None else str(cause)[:200]


def _format(msg: str, args: tuple[object, ...]) -> str:
    try:
        return msg % args if args else msg
    except (TypeError, ValueError):
        return f"{msg} {args!r}"
