"""JSON on the wire: the media type and compact bytes, for every server's answers (and its refusals)."""

from __future__ import annotations

import json
from typing import Any

import orjson

JSON_TYPE = "application/json"


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # what orjson refuses (integers beyond 64 bits): the stdlib writes it
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
