"""Argument checks shared by the tools and host operations. Every failure is InvalidArgument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidArgument
from .settings import MAX_NAME_LENGTH, MAX_TEXT_BYTES

_MISSING = object()

# Sequences are 64-bit signed in both stores: anything larger can never name an event.
MAX_SEQUENCE = 2**63 - 1


def check_args(args: object, allowed: set[str], tool: str) -> Mapping[str, Any]:
    if not isinstance(args, Mapping):
        raise InvalidArgument(f"{tool}: arguments must be a JSON object")
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise InvalidArgument(
            f"{tool}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    return args


def text(value: object, what: str, *, max_bytes: int = MAX_TEXT_BYTES, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:  # input beyond a documented limit is invalid_argument (docs/http.md)
        raise InvalidArgument(f"{what} is {size} bytes; the limit is {max_bytes} bytes")
    return value


def name(value: object, what: str) -> str:
    """Channel, label, operation and run ids: non-empty strings of at most 200 characters."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"{what} is longer than {MAX_NAME_LENGTH} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidArgument(f"{what} contains control characters")
    return value


def channel(value: object, what: str = "channel") -> str | None:
    """An inbound channel: a string like ``name`` but blank is allowed (the summary then says ``via unknown``).
    Returns the trimmed channel, or None when blank."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    return name(value.strip(), what) if value.strip() else None


def optional_name(value: object, what: str) -> str | None:
    return None if value is None else name(value, what)


def integer(value: object, what: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A JSON integer; bools, floats (even 3.0) and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise InvalidArgument(f"{what} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{what} must be <= {maximum}, got {value}")
    return value


def sequence(value: object, what: str) -> int:
    """A sequence number such as ``changesSince`` or ``after``: an integer in [0, 2^63 - 1]."""
    return integer(value, what, maximum=MAX_SEQUENCE)


def number(value: object, what: str, *, minimum: float = 0, maximum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidArgument(f"{what} must be a number, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidArgument(f"{what} must be between {minimum} and {maximum}, got {value}")
    return float(value)


def boolean(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be true or false, got {type(value).__name__}")
    return value


def one_of(value: object, what: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgument(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def string_list(value: object, what: str, choices: tuple[str, ...] | None = None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{what} must be a list of strings")
    if choices is not None:
        for v in value:
            one_of(v, what, choices)
    return value


MAX_IDS = 1000
MAX_ID = (1 << 63) - 1


def id_list(value: object, what: str) -> list[int]:
    """Queue entry ids to acknowledge: a list of at most 1000 integers in [1, 2^63 - 1]."""
    if not isinstance(value, list):
        raise InvalidArgument(f"{what} must be a list of entry ids (integers), got {type(value).__name__}")
    if len(value) > MAX_IDS:
        raise InvalidArgument(f"{what} holds {len(value)} ids; the limit is {MAX_IDS}")
    return [integer(v, what, minimum=1, maximum=MAX_ID) for v in value]
