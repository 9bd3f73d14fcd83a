"""Which Codex CLI rollout rows are a person's prompt.

Only the display copy counts: an ``event_msg`` whose payload is a ``user_message`` (legacy history;
older builds tag harness text with a ``kind`` other than ``plain``) or an ``item_completed`` carrying a
``UserMessage`` item (paginated history). The ``response_item`` protocol copy of the same prompt, which
also carries harness scaffolding, never counts.
"""

from __future__ import annotations

from typing import Any

from .normalize import normalize
from .rules import small
from .verdict import NOT_HUMAN, Verdict


def classify_codex(row: Any) -> Verdict:
    if not isinstance(row, dict) or row.get("type") != "event_msg":
        return NOT_HUMAN
    payload = row.get("payload")
    if not isinstance(payload, dict):
        return NOT_HUMAN
    kind = payload.get("type")
    timestamp = small(row.get("timestamp"))
    if kind == "user_message":
        tag = payload.get("kind")
        if tag is not None and tag != "plain":
            return NOT_HUMAN
        message = payload.get("message")
        return Verdict(True, timestamp=timestamp, text=normalize(message) if isinstance(message, str) else "")
    if kind == "item_completed":
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "UserMessage":
            return NOT_HUMAN
        content = item.get("content")
        if not isinstance(content, list):
            return NOT_HUMAN
        parts = [
            normalize(p["text"])
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        return Verdict(True, timestamp=timestamp, parts=parts)
    return NOT_HUMAN
