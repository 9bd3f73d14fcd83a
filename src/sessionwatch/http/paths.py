"""Paths as the gateway sees them: an encoded '/' inside one path segment survives routing."""

from __future__ import annotations

# The raw-path fix-up in middleware.py puts this in place of an encoded '/' inside one path segment;
# endpoints turn it back into '/', and an error message shows it encoded again.
SLASH_STAND_IN = "\ue000"


def shown(path: str) -> str:
    """The request path as the client sent it (the stand-in never leaves the gateway)."""
    return path.replace(SLASH_STAND_IN, "%2F")
