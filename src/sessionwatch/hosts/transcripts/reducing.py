"""What the streaming reducers of oversized rows share (each room's ``stream.py`` holds its reducer).

A reducer for :class:`~.jsonstream.JsonStream` applies exactly the rules of its dict-path twin (the room's
``rows.py``), keeping only flags, small strings and :class:`StreamText` digests. Duplicate keys behave as in
the parser: the last value wins, because a value starting at a path resets what was kept for it.
"""

from __future__ import annotations

from typing import Any

from .normalize import StreamText

MAX_PART_DIGESTS = 64


def scalar_truthy(kind: str, value: Any) -> bool:
    if kind in ("object", "array", "true"):
        return True
    if kind == "string":
        return value != ""  # a long string (None) is non-empty
    if kind == "number":
        return float(value) != 0
    return False


def text_of(state: dict[str, Any] | None, watch: tuple[str, ...] = ()) -> StreamText | None:
    return None if state is None else StreamText.from_state(state, watch)
