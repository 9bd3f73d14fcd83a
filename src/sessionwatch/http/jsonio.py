"""JSON in and out: compact responses, and request bodies read with a size limit."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..errors import InvalidArgument, PayloadTooLarge
from ..serving.wire import JSON_TYPE, dumps
from .validate import json_type

__all__ = ["JSON_TYPE", "dumps", "json_response", "parse_json", "read_body", "read_object"]


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(value), status, headers, media_type=JSON_TYPE)


def parse_json(raw: bytes) -> Any:
    """Strict RFC 8259 JSON (UTF-8, no NaN/Infinity, bounded nesting); any failure is a 400."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"request body is not valid JSON: {exc}") from None


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes whatever Content-Length claimed."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body is larger than {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise InvalidArgument("client disconnected while sending the body") from None
    return b"".join(chunks)


async def read_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; an empty body is ``{}``."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return {}
    value = parse_json(raw)
    if not isinstance(value, dict):
        raise InvalidArgument(f"request body must be a JSON object, got {json_type(value)}")
    return value
