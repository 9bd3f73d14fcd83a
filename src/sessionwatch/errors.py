"""Errors with stable codes, shared by every face (Python, HTTP, MCP, CLI)."""

from __future__ import annotations

from typing import Any


class SessionwatchError(Exception):
    """Base error. ``code`` is stable and documented; ``message`` is for people."""

    code = "internal"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


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


class StoreUnavailable(SessionwatchError):
    """The store could not be opened or written (not bad input)."""

    code = "unavailable"
    http_status = 503


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
        StoreUnavailable,
    )
}


def error_from_json(body: dict[str, Any]) -> SessionwatchError:
    """Rebuild an error from its JSON form (used by remote clients of the gateway)."""
    err = body.get("error") or {}
    cls = ERROR_TYPES.get(str(err.get("code")), SessionwatchError)
    return cls(str(err.get("message", "unknown error")))
