"""Which Claude Code transcript rows are a person's prompt (docs/upstream.md, "Which rows are a
person").

A row counts when it is a ``user`` row with role ``user``; not sidechain, meta, compaction summary or
transcript-only; not marked ``promptSource`` sdk/system; its content is a string or an array without
any ``tool_result`` block; it has at least one text candidate; and no candidate is an inter-session
delivery or a reseed envelope. Its self-echo text is the first candidate.
"""

from __future__ import annotations

from typing import Any

from ..transcripts.normalize import normalize
from ..transcripts.rules import MACHINE_PROMPT_SOURCES, bad_candidate, small, truthy
from ..transcripts.verdict import NOT_HUMAN, Verdict


def could_matter(line: bytes) -> bool:
    """The exact byte pre-filter: a row whose ``type`` decodes to ``user`` contains ``"user"``
    literally, or uses a ``\\u`` escape."""
    return b'"user"' in line or b"\\u" in line


def classify_claude(row: Any) -> Verdict:
    if not isinstance(row, dict) or row.get("type") != "user":
        return NOT_HUMAN
    message = row.get("message")
    if not isinstance(message, dict) or message.get("role") != "user":
        return NOT_HUMAN
    if truthy(row.get("isSidechain")) or truthy(row.get("isMeta")):
        return NOT_HUMAN
    if truthy(row.get("isCompactSummary")) or truthy(row.get("isVisibleInTranscriptOnly")):
        return NOT_HUMAN
    if small(row.get("promptSource")) in MACHINE_PROMPT_SOURCES:
        return NOT_HUMAN
    content = message.get("content")
    if isinstance(content, str):
        candidates = [content]
    elif isinstance(content, list):
        candidates = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                return NOT_HUMAN
            if kind == "text" and isinstance(block.get("text"), str):
                candidates.append(block["text"])
    else:
        return NOT_HUMAN
    if not candidates:
        return NOT_HUMAN
    normalized = [normalize(c) for c in candidates]
    if any(bad_candidate(n) for n in normalized):
        return NOT_HUMAN
    return Verdict(True, timestamp=small(row.get("timestamp")), text=normalized[0])
