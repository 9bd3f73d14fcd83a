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
import time

# what one hook run may spend on a server that does not answer, all calls together
from ..hosts.hook_budget import BUDGET_ENV as BUDGET_ENV, BUDGET_S as BUDGET_S, budget_s as budget_s
from ..hosts.state_folder import state_path

# Imported where used, or only for a type checker: typing, threading, contextlib and signal are a noticeable
# part of a quick hook run, and a run against a server remembered as down needs none of them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

REMEMBER_S = 30.0  # how long later runs skip it after a miss


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


def _fire(signum: int, frame: object) -> None:
    raise _OutOfTime


class _Alarm:  # not contextlib.contextmanager: importing contextlib costs a quick run more than this class
    """Interrupt the block after ``seconds`` of wall time, whatever it is blocked in (connect, send,
    receive: each has its own timeout, but together they could add up past the budget). Only on the main
    thread of a POSIX process; elsewhere the calls' own timeouts are the bound."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.previous: object = None
        self.armed = False

    def __enter__(self) -> None:
        import signal

        if not hasattr(signal, "setitimer"):
            return
        try:
            self.previous = signal.signal(signal.SIGALRM, _fire)
        except ValueError:  # not the main thread (signal.signal refuses there)
            return
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 0.001))

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)  # type: ignore[arg-type]


def bounded(budget: Budget, call: Callable[[float], T]) -> T:
    """``call(timeout)`` within what the budget has left; :class:`Missed` when it is spent."""
    left = budget.left()
    if left <= 0:
        raise Missed(f"the {budget.seconds:g} s budget of this run is spent")
    try:
        with _Alarm(left):
            return call(left)
    except _OutOfTime:
        raise Missed(f"no answer within the {budget.seconds:g} s budget of this run") from None


def public(url: str) -> str:
    """A server URL without its credentials (``user:secret@``), for the log and the mark."""
    scheme, sep, rest = url.partition("//")
    if not sep:
        return url
    netloc, slash, path = rest.partition("/")
    return f"{scheme}//{netloc.rpartition('@')[2]}{slash}{path}"


class DownMark:
    """The remembered miss of one server (keyed by its URL; credentials are never written)."""

    def __init__(self, where: str) -> None:
        try:  # the builtin module: hashlib would load OpenSSL, a noticeable part of a hook run
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - not CPython
            from hashlib import blake2b
        self.where = where
        digest = blake2b(where.encode(), digest_size=12).hexdigest()
        self.path = os.path.join(state_path(), "hooks", f"down-{digest}.json")

    def reason(self, now: float | None = None) -> str | None:
        """Why the server is remembered as down (and until when), or None when it is not."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.loads(f.read())
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
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            body = {"server": public(self.where), "until": time.time() + REMEMBER_S, "reason": why[:300]}
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(body))
            os.replace(tmp, self.path)  # atomic: a concurrent run reads the old mark or this one
        except OSError:
            pass
