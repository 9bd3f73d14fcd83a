"""Exit codes scripts can rely on (documented in docs/cli.md)."""

from __future__ import annotations

from ..errors import SessionwatchError

OK = 0
ERROR = 1  # unexpected failure, or the store / gateway is unavailable
USAGE = 2  # bad usage or an invalid argument
NOT_FOUND = 3
DENIED = 4  # unauthorized or forbidden
CONFLICT = 5

_BY_CODE = {
    "invalid_argument": USAGE,
    "payload_too_large": USAGE,
    "not_found": NOT_FOUND,
    "unknown_tool": NOT_FOUND,
    "thread_not_found": NOT_FOUND,
    "unauthorized": DENIED,
    "forbidden": DENIED,
    "conflict": CONFLICT,
}


def exit_code_for(error: SessionwatchError | str) -> int:
    code = error if isinstance(error, str) else error.code
    return _BY_CODE.get(code, ERROR)
