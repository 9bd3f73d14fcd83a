"""Log lines as JSON (``--log-format json`` on serve, node and mcp over HTTP), with the request id.

``configure("json")`` switches this process: the root logger, sessionwatch's own loggers and uvicorn's
(``uvicorn_log_config``) all write one JSON object per line to stderr. ``REQUEST_ID`` holds the id of
the HTTP request being served (set by the gateway's ASGI layer, copied into worker threads by anyio),
so every record emitted while serving a request carries ``requestId``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from contextvars import ContextVar
from typing import Any

REQUEST_ID: ContextVar[str | None] = ContextVar("sessionwatch_request_id", default=None)
FORMATS = ("text", "json")
_state = {"format": os.environ.get("SESSIONWATCH_LOG_FORMAT", "text").lower()}


def is_json() -> bool:
    return _state["format"] == "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, requestId, extra ``fields``, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        rid = getattr(record, "request_id", None) or REQUEST_ID.get()
        if rid and "requestId" not in out:
            out["requestId"] = rid
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def formatter(text_format: str) -> logging.Formatter:
    """The formatter for this process's log format (``text_format`` in text mode)."""
    return JsonFormatter() if is_json() else logging.Formatter(text_format)


def configure(fmt: str | None) -> None:
    """Select the log format for this process; ``json`` also re-formats handlers already installed."""
    if fmt is None:
        return
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    _state["format"] = fmt
    if fmt != "json":
        return
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    for name in ("", "sessionwatch", "sessionwatch.http.access", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.setFormatter(JsonFormatter())


def uvicorn_log_config() -> dict[str, Any] | None:
    """uvicorn's ``log_config`` in JSON mode (its loggers write JSON to stderr); None in text mode."""
    if not is_json():
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "sessionwatch.logformat.JsonFormatter"}},
        "handlers": {"default": handler, "access": dict(handler)},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }
