"""The reader a room with its own session store offers the monitor (Pi's files, OpenCode's database).

A :class:`SessionReader` adopts a session (the link's ref and baseline marker), lists the sessions, and
reads one from its marker: a :class:`Reading` says how many prompts a person sent since (and the marker to
keep), that the session is gone (three such readings record ``upstream_missing``), or nothing (``None``:
inconclusive, or nothing moved). ``upstream/rooms.py`` turns it into the monitor's provider and the
adoption's baseline; a room never sees the monitor's types.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

Adopted = tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]
"""((upstream kind, ref, marker), None) for an adoption, or (None, why it cannot be linked now)."""


@dataclass(slots=True)
class Reading:
    """One read of a session from its marker. ``gone``: the host answers and has no such session."""

    turns: int = 0
    marker: dict[str, Any] | None = None
    occurred_at: int | None = None
    dedupe_id: str | None = None
    note: str | None = None
    gone: bool = False


class SessionReader(Protocol):
    """What the monitor, adoption and ``threads`` ask of a room's own reader (``catalog_id``: the catalog
    its sessions are listed in; ``upstream_kind``: what a link's ``upstreamKind`` says)."""

    catalog_id: str
    upstream_kind: str

    def at(self, place: str | os.PathLike[str]) -> SessionReader:
        """The same reader over another place (``sessionwatch`` configured with another root or database)."""
        ...

    def adopt(self, thread_id: str) -> Adopted:
        """The link's ref and baseline; NotFound when the room has no such thread."""
        ...

    def list_threads(self) -> list[dict[str, Any]]: ...

    def read(
        self,
        ref: dict[str, Any],
        thread_id: str,
        marker: dict[str, Any],
        own: Callable[[], Iterable[str]],
        *,
        window: int,
        deadline: float,
    ) -> Reading | None:
        """What moved since ``marker``; ``own``: the session's own recent texts (read only when a prompt is
        found). None: nothing to change."""
        ...
