"""Pi's sessions as the monitor's reader (``readers.SessionReader``): the file of a session found by id
(``sessions.py``), its baseline and each read from the link's cursor (``reader.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ...errors import NotFound
from ..readers import Adopted, Reading
from . import reader
from .sessions import CATALOG, UPSTREAM_KIND, PiSessions


class PiReader:
    """``root``: Pi's agent dir (default ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``)."""

    catalog_id = CATALOG
    upstream_kind = UPSTREAM_KIND

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.sessions = PiSessions(root)

    def at(self, place: str | os.PathLike[str]) -> PiReader:
        return PiReader(place)

    @property
    def base(self) -> Any:
        return self.sessions.base

    def adopt(self, thread_id: str) -> Adopted:
        """The session's file, and the reader's baseline cursor on it."""
        try:
            found = self.sessions.locate(thread_id)
        except OSError as exc:
            return None, f"listing the {self.catalog_id} catalog failed: {exc.strerror or exc}"
        if found is None:
            raise NotFound(f"no {self.catalog_id} thread {thread_id!r} under {self.base}")
        try:
            marker = reader.baseline(found.path)
        except OSError as exc:
            return None, f"cannot read {found.path} for a baseline: {exc.strerror or exc}"
        return (self.upstream_kind, {"filePath": found.path}, marker), None

    def list_threads(self) -> list[dict[str, Any]]:
        return self.sessions.list_threads(include_paths=True)

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
        path = ref.get("filePath")
        if not isinstance(path, str):
            return None
        found = reader.scan(path, marker, own, window=window, deadline=deadline)
        if found.missing:
            return Reading(gone=True, note=found.note or "file not found")
        if found.cursor is None:
            return None
        out = Reading(found.turns, found.cursor, note=found.note)
        if found.turns:
            out.occurred_at, out.dedupe_id = found.occurred_at, found.dedupe_id
        return out
