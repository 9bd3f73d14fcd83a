"""Waiting for something observable instead of sleeping a fixed time.

A fixed sleep is either too short on a busy machine (a flaky test) or too long everywhere (a slow one).
These helpers poll a condition until it holds, up to a deadline, and fail with a message naming what
never happened. Sleeps that remain in tests are the subject of the test (a clock must pass, or nothing
may happen within a window) and say so in a comment.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx

T = TypeVar("T")


def wait_until(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.02, what: str = "") -> T:
    """Call ``check`` until it returns something truthy, and return that; AssertionError after ``timeout``.

    An exception raised by ``check`` counts as "not yet" (a server still starting refuses connections);
    the last one is shown if the deadline passes. An AssertionError is not "not yet": it ends the wait at
    once (a check asserts that the server it waits for is still running).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except AssertionError:
            raise
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what or 'condition'} not reached within {timeout} s (last: {last!r})")
        time.sleep(interval)


async def await_until(
    check: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """``wait_until`` for an async check, sleeping with anyio between calls."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = await check()
            if value:
                return value
            last = value
        except AssertionError:
            raise
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what or 'condition'} not reached within {timeout} s (last: {last!r})")
        await anyio.sleep(interval)


def wait_http(
    url: str,
    proc: subprocess.Popen[Any] | None = None,
    *,
    status: int | None = 200,
    timeout: float = 20.0,
    log: Path | None = None,
    **request: Any,
) -> httpx.Response:
    """GET ``url`` until it answers (with ``status``; any status when None) and return the response.

    ``proc`` is the server: when it exits first, the wait ends at once with its exit code and the tail of
    ``log`` (or of its stderr, when that is a pipe) instead of running into the deadline.
    """

    def answered() -> httpx.Response | None:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{url}: the server exited with {proc.returncode}: {_tail(proc, log)}")
        res = httpx.get(url, timeout=5, **request)
        return res if status is None or res.status_code == status else None

    return wait_until(answered, timeout=timeout, interval=0.05, what=f"an answer from {url}")


def _tail(proc: subprocess.Popen[Any], log: Path | None) -> str:
    if log is not None:
        return log.read_text(errors="replace")[-2000:]
    if proc.stderr is not None:
        out = proc.stderr.read()
        return (out.decode(errors="replace") if isinstance(out, bytes) else str(out))[-2000:]
    return ""
