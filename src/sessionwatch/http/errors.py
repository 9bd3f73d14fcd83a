"""JSON error bodies for the HTTP face: every failure is ``{"error": {"code", "message"}}``."""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import ERROR_TYPES, SessionwatchError
from ..repeats import RepeatedFailures
from .jsonio import json_response
from .paths import shown

log = logging.getLogger("sessionwatch.http")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

# Codes the HTTP layer adds on top of the engine's stable ones (routing problems, not bad input).
HTTP_ONLY_CODES = {404: "not_found", 405: "method_not_allowed"}


def error_json(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def status_for_code(code: object) -> int:
    """The HTTP status of a stable error code (an unknown code is an internal error)."""
    cls = ERROR_TYPES.get(str(code))
    return cls.http_status if cls is not None else 500


def _retry_header(retry_after: object, headers: dict[str, str] | None) -> dict[str, str] | None:
    """A transient failure says when to try again (``retryAfter`` in the body, ``Retry-After`` here)."""
    if not isinstance(retry_after, int) or isinstance(retry_after, bool):
        return headers
    return {"Retry-After": str(retry_after), **(headers or {})}


def error_response(exc: SessionwatchError, headers: dict[str, str] | None = None) -> Response:
    return json_response(exc.to_json(), exc.http_status, _retry_header(exc.retry_after_s, headers))


def tool_error_response(result: dict[str, Any]) -> Response:
    """A tool's error object as a response with the status its code maps to."""
    err = result["error"]
    return json_response(result, status_for_code(err.get("code")), _retry_header(err.get("retryAfter"), None))


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_ONLY_CODES.get(exc.status_code, "invalid_argument")
    path = shown(request.url.path)
    message = {404: f"no route {path}", 405: f"{request.method} is not allowed on {path}"}
    return json_response(
        error_json(code, message.get(exc.status_code, str(exc.detail))), exc.status_code, dict(exc.headers or {})
    )


async def internal_error_handler(request: Request, exc: Exception) -> Response:
    # Reached only by a bug: handlers turn bad input into 4xx and store failures into 503.
    failure_log.exception("unhandled error on %s %s", request.method, request.url.path, key=exc)
    return json_response(error_json("internal", "internal error; see the gateway log"), 500)
