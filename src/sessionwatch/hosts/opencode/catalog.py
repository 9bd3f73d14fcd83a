"""OpenCode's sessions as the monitor's reader (``readers.SessionReader``), over the room's reader of its
database (``reader.py``).

The ref is ``{dbPath}`` (the database the session lives in), the marker ``{seq, seen, t}`` (see the
reader). A session deleted in OpenCode is gone, and three such reads record ``upstream_missing`` like a
removed transcript; a locked database or one whose schema moved is inconclusive, never gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ...errors import NotFound
from ..readers import Adopted, Reading
from .database import Unreadable
from .reader import GONE, Found, OpenCodeCatalog


class OpenCodeReader:
    """Adoption, listing and reads over one database (``db_path``; default: where OpenCode itself looks)."""

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        self.catalog = OpenCodeCatalog(db_path)
        self.catalog_id = self.catalog.catalog_id
        self.upstream_kind = self.catalog.upstream_kind

    def at(self, place: str | os.PathLike[str]) -> OpenCodeReader:
        return OpenCodeReader(place)

    def adopt(self, thread_id: str) -> Adopted:
        """NotFound when the database answers without the session, or has no top-level session by that id;
        (None, why) when it cannot be read now."""
        catalog = self.catalog
        try:
            session = catalog.locate(thread_id)
            if session is not None and session.parent_id is None:
                marker = catalog.baseline(thread_id)
        except Unreadable as exc:
            return None, f"OpenCode's database cannot be read now: {exc}"
        if session is None:
            raise NotFound(f"no OpenCode session {thread_id!r} in {catalog.db_path}")
        if session.parent_id is not None:
            raise NotFound(
                f"OpenCode session {thread_id!r} is a subagent's (of {session.parent_id}): adopt its parent session"
            )
        return (catalog.upstream_kind, {"dbPath": str(catalog.db_path)}, marker), None

    def list_threads(self) -> list[dict[str, Any]]:
        return self.catalog.list_threads()

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
        db = ref.get("dbPath")
        catalog = self.catalog
        if isinstance(db, str) and db != str(catalog.db_path):
            catalog = OpenCodeCatalog(db)  # adopted from another database (another OPENCODE_DB)
        found = catalog.scan(thread_id, marker, own)
        if found is None:
            return None
        if found == GONE:
            return Reading(gone=True, note="the OpenCode session is gone from its database")
        assert isinstance(found, Found)
        if found.next_marker == marker and not found.turns:
            return None  # nothing moved
        out = Reading(found.turns, found.next_marker, note=found.note)
        if found.turns:
            out.occurred_at, out.dedupe_id = found.occurred_at, found.dedupe_id
        return out
