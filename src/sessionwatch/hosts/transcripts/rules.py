"""Constants shared by the Claude and Codex row classifiers (dict and streaming paths)."""

from __future__ import annotations

from typing import Any

# Text a session sends to another through an inter-session delivery starts with this.
INTER_SESSION_PREFIX = "[Inter-session message]"
# The wrapper used to reseed a thread with a prior transcript: a lead sentence plus two sections.
RESEED_LEAD = "Continue this conversation using the OpenClaw transcript below as prior session history"
RESEED_TAGS = ("<conversation_history>", "<next_user_message>")
# Claude Code's promptSource: a person typed it (queued = typed while the agent was busy) or not.
HUMAN_PROMPT_SOURCES = frozenset({"typed", "queued"})
MACHINE_PROMPT_SOURCES = frozenset({"sdk", "system"})
# Small string fields are compared only while they are at most this long (longer never matches).
SMALL = 64


def truthy(value: Any) -> bool:
    """JavaScript truthiness, which is how the CLIs' flags are meant: objects and arrays are true."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, (int, float)):
        return value == value and value != 0
    if isinstance(value, str):
        return value != ""
    return True


def small(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= SMALL else None


def is_reseed(normalized: str, seen_tags: tuple[bool, ...] | None = None) -> bool:
    if not normalized.startswith(RESEED_LEAD):
        return False
    if seen_tags is not None:
        return all(seen_tags)
    return all(tag in normalized for tag in RESEED_TAGS)


def bad_candidate(normalized: str, seen_tags: tuple[bool, ...] | None = None) -> bool:
    """An inter-session delivery or a reseed envelope: never a person's prompt."""
    return normalized.startswith(INTER_SESSION_PREFIX) or is_reseed(normalized, seen_tags)
