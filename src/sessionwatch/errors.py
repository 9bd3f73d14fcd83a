"""Errors with stable codes, shared by every face (Python, HTTP, MCP, CLI)."""

from __future__ import annotations

from typing import Any


class SessionwatchError(Exception):
    """Base error. ``code`` is stable and documented; ``message`` is for people."""

    code = "internal"
    http_status = 500
    retry_after_s: int | None = None  # on unavailable errors: when to try again (HTTP Retry-After, retryAfter)
    transient = False  # a retry is expected to cure it (the CLI exits 75, EX_TEMPFAIL)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retry_after_s is not None:
            err["retryAfter"] = self.retry_after_s
        return {"error": err}


class InvalidArgument(SessionwatchError):
    code = "invalid_argument"
    http_status = 400


class NotFound(SessionwatchError):
    code = "not_found"
    http_status = 404


class UnknownTool(SessionwatchError):
    code = "unknown_tool"
    http_status = 404


class Forbidden(SessionwatchError):
    code = "forbidden"
    http_status = 403


class Unauthorized(SessionwatchError):
    code = "unauthorized"
    http_status = 401


class PayloadTooLarge(SessionwatchError):
    code = "payload_too_large"
    http_status = 413


class Conflict(SessionwatchError):
    code = "conflict"
    http_status = 409


class RateLimited(SessionwatchError):
    """One token holds as many streams or requests in progress as it may (HTTP 429); other tokens are
    not affected. Transient: retry after ``retry_after_s``, or end one of the token's own streams."""

    code = "rate_limited"
    http_status = 429
    retry_after_s: int | None = 1
    transient = True

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StoreUnavailable(SessionwatchError):
    """The store could not be opened, read or written (not bad input): transient, try again."""

    code = "unavailable"
    http_status = 503
    retry_after_s = 1


class StoreUnreachable(StoreUnavailable):
    """The database server (or, for a client, the gateway) did not answer, or said it cannot take
    connections yet (starting up, shutting down, full): a wait may cure it."""

    transient = True


class StoreInDoubt(StoreUnavailable):
    """A write whose outcome is unknown: the connection to the database broke while it was out, and the
    store could not prove it durable. Never reported as a success; retrying is safe where the write has
    a dedupe key (or is idempotent), and may otherwise write it twice."""

    transient = True


# The name host operations document: a failed read or drain raises ``Unavailable`` (HTTP 503).
Unavailable = StoreUnavailable

ERROR_TYPES: dict[str, type[SessionwatchError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        UnknownTool,
        Forbidden,
        Unauthorized,
        PayloadTooLarge,
        Conflict,
        RateLimited,
        StoreUnavailable,
    )
}


def error_from_json(body: dict[str, Any]) -> SessionwatchError:
    """Rebuild an error from its JSON form (used by remote clients of the gateway)."""
    err = body.get("error") or {}
    cls = ERROR_TYPES.get(str(err.get("code")), SessionwatchError)
    out = cls(str(err.get("message", "unknown error")))
    retry = err.get("retryAfter")
    if isinstance(retry, int) and not isinstance(retry, bool) and retry >= 0:
        out.retry_after_s = retry
        out.transient = True  # the gateway said when to try again
    return out
