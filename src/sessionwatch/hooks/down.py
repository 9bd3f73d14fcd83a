"""A hook's time on a gateway (or PostgreSQL server) that does not answer: bounded per run, remembered
across runs.

One run gives its remote calls :data:`BUDGET_S` (or ``SESSIONWATCH_HOOK_BUDGET``) in total (a
:class:`Budget`). A call that fails in transport (refused, unreachable, timed out, cut off) or outlives
the budget is a *miss*: the run stops talking to that server, and a :class:`DownMark` makes every hook
run on this machine skip it for :data:`REMEMBER_S`, without a connection attempt. Nothing is lost by
skipping: the notices stay queued and the first run after the mark expires delivers them.

The mark is one small JSON file per server under the hooks' state folder, replaced atomically, so
concurrent hook runs read an old or a new mark, never half of one; two runs that miss at once both write
one, and either is right.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from .delivery import state_dir

BUDGET_S = 2.0  # what one hook run may spend on a server that does not answer, all calls together
BUDGET_ENV = "SESSIONWATCH_HOOK_BUDGET"  # seconds, for a gateway on a slow link (0.1 to 30)


def budget_s() -> float:
    """The budget of this run: ``SESSIONWATCH_HOOK_BUDGET`` when it is a number from 0.1 to 30, else 2 s."""
    try:
        value = float(os.environ.get(BUDGET_ENV, ""))
    except ValueError:
        return BUDGET_S
    return value if 0.1 <= value <= 30.0 else BUDGET_S


REMEMBER_S = 30.0  # how long later runs skip it after a miss

T = TypeVar("T")


class Missed(Exception):
    """The server did not answer this run (or is remembered as down): nothing more is asked of it."""


class _OutOfTime(BaseException):
    """Raised by the alarm inside a blocking call: a BaseException, so no ``except Exception`` on the
    way (the HTTP client's, the driver's) can swallow it."""


class Budget:
    """The time one run has left for remote calls (monotonic)."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = budget_s() if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of wall time, whatever it is blocked in (connect, send,
    receive: each has its own timeout, but together they could add up past the budget). Only on the main
    thread of a POSIX process; elsewhere the calls' own timeouts are the bound."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bounded(budget: Budget, call: Callable[[float], T]) -> T:
    """``call(timeout)`` within what the budget has left; :class:`Missed` when it is spent."""
    left = budget.left()
    if left <= 0:
        raise Missed(f"the {budget.seconds:g} s budget of this run is spent")
    try:
        with _alarm(left):
            return call(left)
    except _OutOfTime:
        raise Missed(f"no answer within the {budget.seconds:g} s budget of this run") from None


def public(url: str) -> str:
    """A server URL without its credentials (``user:secret@``), for the log and the mark."""
    return re.sub(r"//[^/@]*@", "//", url)


class DownMark:
    """The remembered miss of one server (keyed by its URL; credentials are never written)."""

    def __init__(self, where: str) -> None:
        try:  # the builtin module: hashlib would load OpenSSL, a noticeable part of a hook run
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - not CPython
            from hashlib import blake2b
        self.where = where
        self.path = state_dir() / "hooks" / f"down-{blake2b(where.encode(), digest_size=12).hexdigest()}.json"

    def reason(self, now: float | None = None) -> str | None:
        """Why the server is remembered as down (and until when), or None when it is not."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            until, why = float(data["until"]), str(data.get("reason", ""))
        except (OSError, ValueError, TypeError, KeyError):
            return None  # none, or unreadable: try the server
        left = until - (time.time() if now is None else now)
        if not 0 < left <= REMEMBER_S:  # expired, or written by a clock that has since gone back
            return None
        return f"remembered as down for {left:.1f} s more ({why})"

    def mark(self, why: str) -> None:
        """Remember a miss for REMEMBER_S from now (best-effort: a mark that cannot be written is skipped)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            body = {"server": public(self.where), "until": time.time() + REMEMBER_S, "reason": why[:300]}
            tmp.write_text(json.dumps(body), encoding="utf-8")
            os.replace(tmp, self.path)  # atomic: a concurrent run reads the old mark or this one
        except OSError:
            pass
