"""The OpenCode catalog in the monitor: its adoption baseline and its provider, over the host room's reader
(``hosts/opencode/reader.py``), which knows OpenCode's database.

The ref is ``{dbPath}`` (the database the session lives in), the marker ``{seq, seen, t}`` (see the
reader). A session deleted in OpenCode is a miss, and three misses record ``upstream_missing`` like a
removed transcript; a locked database or one whose schema moved is inconclusive, never a miss.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..errors import NotFound
from ..hosts.opencode.database import Unreadable
from ..hosts.opencode.reader import CATALOG_ID, GONE, Found, OpenCodeCatalog
from .probes import ACTIVITY, Outcome, Probe, missing

log = logging.getLogger("sessionwatch.upstream")

__all__ = ["CATALOG_ID", "OpenCodeCatalog", "OpenCodeRoom", "OpenCodeSessions", "baseline"]


def baseline(
    catalog: OpenCodeCatalog, thread_id: str
) -> tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]:
    """(upstream kind, ref, marker) of an adoption, or (None, why) when the database cannot be read now.
    NotFound when the database answers without the session, or has no top-level session by that id."""
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


class OpenCodeSessions:
    """Provider: every probe one short read-only look at OpenCode's database."""

    def __init__(self, catalog: OpenCodeCatalog) -> None:
        self.catalog = catalog

    def scan(self, probes: list[Probe]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        for probe in probes:
            try:
                out.append(self._one(probe))
            except Exception:
                log.exception(
                    "scanning OpenCode session %s for %s failed", probe.link.thread_id, probe.link.session_key
                )
                out.append(None)
        return out

    def _one(self, probe: Probe) -> Outcome | None:
        ref = probe.link.upstream_ref.get("dbPath")
        catalog = self.catalog
        if isinstance(ref, str) and ref != str(catalog.db_path):
            catalog = OpenCodeCatalog(ref)  # adopted from another database (another OPENCODE_DB)
        found = catalog.scan(probe.link.thread_id, probe.link.marker, lambda: probe.own().raw)
        if found is None:
            return None
        if found == GONE:
            return missing("the OpenCode session is gone from its database")
        assert isinstance(found, Found)
        if found.next_marker == probe.link.marker and not found.turns:
            return None  # nothing moved
        outcome = Outcome(ACTIVITY, human_turns=found.turns, next_marker=found.next_marker, note=found.note)
        if found.turns:
            outcome.occurred_at = found.occurred_at
            outcome.dedupe_id = found.dedupe_id
        return outcome


class OpenCodeRoom:
    """The OpenCode room as ``rooms.RoomCatalog``: adoption, listing and the provider over one database
    (``db_path``; default: where OpenCode itself looks)."""

    catalog_id = CATALOG_ID

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        self.catalog = OpenCodeCatalog(db_path)

    def adopt(self, thread_id: str) -> tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]:
        return baseline(self.catalog, thread_id)

    def list_threads(self) -> list[dict[str, Any]]:
        return self.catalog.list_threads()

    def provider(self, window: int, budget_s: float) -> OpenCodeSessions:
        return OpenCodeSessions(self.catalog)
