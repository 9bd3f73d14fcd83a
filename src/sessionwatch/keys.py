"""Session keys: ``agent:<agentId>:<rest>``, subagent keys, main keys and the bare ``global`` key."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidArgument

GLOBAL_KEY = "global"
MAX_KEY_LENGTH = 512
MAIN_KEY = "main"
SESSION_KINDS = ("main", "direct", "group", "subagent", "cron", "other")
_GROUP_PARTS = frozenset({"group", "channel", "room"})
_DIRECT_PARTS = frozenset({"direct", "dm"})


@dataclass(frozen=True, slots=True)
class SessionKey:
    raw: str
    agent_id: str | None  # None for the bare global key
    rest: str | None

    @property
    def qualified(self) -> bool:
        return self.agent_id is not None

    @property
    def is_subagent(self) -> bool:
        return self.rest is not None and self.rest.lower().startswith("subagent:")


# Characters that can hide or reorder the words around a key wherever a model or a person reads it: the
# C1 controls, the bidirectional embeddings, overrides and isolates, and the zero-width space. Keys made
# before these were refused may hold them: such a key is still found where its session must exist
# (``stored=True``) and is always shown escaped (``shown``). Everything else v1 accepts (accents, CJK,
# emoji with their joiners, a leading U+FEFF) stays a valid key, byte for byte.
_HIDING = frozenset([*range(0x80, 0xA0), 0x200B, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def _refused(ch: str) -> bool:
    """A character no key may hold: whitespace (with the line and paragraph separators), C0, DEL, and _HIDING."""
    o = ord(ch)
    return o < 32 or o == 127 or ch.isspace() or o in _HIDING


def _check_text(value: object, what: str, *, stored: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{what} must not be empty")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidArgument(f"{what} is longer than {MAX_KEY_LENGTH} characters")
    for ch in value:
        if ch.isspace() or ord(ch) < 32 or ord(ch) == 127:
            raise InvalidArgument(f"{what} {value!r} contains whitespace or control characters")
        if ord(ch) in _HIDING and not stored:
            raise InvalidArgument(
                f"{what} {value!r} contains U+{ord(ch):04X}, a control or invisible character that can hide "
                "or reorder the text around it: keys may not hold C1 controls, bidirectional controls "
                "(U+202A-U+202E, U+2066-U+2069) or U+200B"
            )
    return value


def shown(key: str) -> str:
    """A key as it is written into text a model or a person reads: every character no new key may hold
    becomes a JSON-style escape (``\\u202e``), so a stored key can neither hide nor reorder the words
    around it. A key that is valid today comes back unchanged, byte for byte."""
    if not any(_refused(ch) for ch in key):
        return key
    return "".join(f"\\u{ord(ch):04x}" if _refused(ch) else ch for ch in key)


def shown_text(text: str) -> str:
    """``shown`` for a whole text (a JSON block, a sentence): the same escapes; inside a JSON string
    ``\\u202e`` means the very character it replaces, so the JSON still decodes to the same values."""
    if not any(ord(ch) in _HIDING or ch in "\u2028\u2029" for ch in text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if ord(ch) in _HIDING or ch in "\u2028\u2029" else ch for ch in text)


def parse_key(value: object, what: str = "sessionKey", *, stored: bool = False) -> SessionKey:
    """Parse and validate a session key; raise InvalidArgument with a clear reason.

    ``stored``: the key names a session that must already exist (a read, a delete), so a key stored
    before the characters in ``_HIDING`` were refused is still accepted; it can never create one."""
    raw = _check_text(value, what, stored=stored)
    if raw == GLOBAL_KEY:
        return SessionKey(raw, None, None)
    parts = raw.split(":")
    if any(p == "" for p in parts):
        raise InvalidArgument(f"{what} {raw!r} has an empty ':'-separated part")
    if parts[0] != "agent" or len(parts) < 3:
        raise InvalidArgument(f"{what} {raw!r} is not a session key: expected 'agent:<agentId>:<rest>' or 'global'")
    return SessionKey(raw, parts[1], ":".join(parts[2:]))


def is_agent_qualified(raw: str) -> bool:
    parts = raw.split(":")
    return len(parts) >= 3 and parts[0] == "agent" and all(parts)


def is_subagent_key(raw: str) -> bool:
    parts = raw.split(":", 2)
    return len(parts) == 3 and parts[0] == "agent" and parts[2].lower().startswith("subagent:")


def agent_of(raw: str) -> str | None:
    parts = raw.split(":", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "agent" else None


def main_key(agent_id: str) -> str:
    return f"agent:{agent_id}:{MAIN_KEY}"


def check_agent_id(value: object, what: str = "agentId") -> str:
    text = _check_text(value, what)
    if ":" in text:
        raise InvalidArgument(f"{what} {text!r} must not contain ':'")
    if len(text) > 200:
        raise InvalidArgument(f"{what} is longer than 200 characters")
    return text


def infer_kind(key: SessionKey) -> str:
    """Kind of a session from its key: main, subagent, group, cron, direct or other."""
    if key.rest is None:
        return "main"
    if key.rest == MAIN_KEY:
        return "main"
    parts = key.rest.lower().split(":")
    if parts[0] == "subagent":
        return "subagent"
    if any(p in _GROUP_PARTS for p in parts):
        return "group"
    if parts[0] == "cron":
        return "cron"
    if any(p in _DIRECT_PARTS for p in parts):
        return "direct"
    return "other"
