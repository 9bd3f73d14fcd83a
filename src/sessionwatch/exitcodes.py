"""Exit codes scripts can rely on (documented in docs/cli.md): the CLI's and every server command's."""

from __future__ import annotations

from .errors import SessionwatchError

OK = 0
ERROR = 1  # unexpected failure
USAGE = 2  # bad usage or an invalid argument
NOT_FOUND = 3
DENIED = 4  # unauthorized or forbidden
CONFLICT = 5
TEMPFAIL = 75  # the store or the gateway is unavailable, or a write is in doubt: try again (sysexits' EX_TEMPFAIL)

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
    """The exit code of an error (or of its code). One a retry is expected to cure (the database or the
    gateway did not answer, a write is in doubt, a gateway said when to retry) is TEMPFAIL."""
    if isinstance(error, str):
        return _BY_CODE.get(error, ERROR)
    if error.transient:
        return TEMPFAIL
    return _BY_CODE.get(error.code, ERROR)
