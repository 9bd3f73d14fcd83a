"""Host rooms that read their own sessions (``hosts.readers.SessionReader``: Pi, OpenCode), seen from the
monitor and adoption.

A room knows its host's store; this adapter gives the monitor a ``Provider`` over it and adoption the room's
baseline, the same shape as the transcript catalogs. Room catalogs are local to this machine: a paired
node does not serve them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..hosts.readers import Adopted, SessionReader
from ..hosts.registry import ROOMS
from ..hosts.transcripts import TranscriptFiles
from .probes import ACTIVITY, Outcome, Probe, missing

log = logging.getLogger("sessionwatch.upstream")

RoomCatalog = SessionReader  # what the monitor, adoption and ``threads`` ask of a room's own reader

__all__ = ["Adopted", "RoomCatalog", "RoomSessions", "rooms"]


class RoomSessions:
    """The monitor's provider for one room's links: each session read from the link's marker, within the
    tick's budget."""

    def __init__(self, reader: SessionReader, window: int, budget_s: float) -> None:
        self.reader = reader
        self.window = window
        self.budget_s = budget_s

    def scan(self, probes: list[Probe]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        deadline = time.monotonic() + self.budget_s
        for probe in probes:
            link = probe.link
            try:
                found = self.reader.read(
                    link.upstream_ref,
                    link.thread_id,
                    link.marker,
                    _own_of(probe),
                    window=self.window,
                    deadline=deadline,
                )
            except Exception:
                log.exception(
                    "reading %s thread %s for %s failed", self.reader.catalog_id, link.thread_id, link.session_key
                )
                out.append(None)
                continue
            if found is None:
                out.append(None)
            elif found.gone:
                out.append(missing(found.note or "gone"))
            else:
                outcome = Outcome(ACTIVITY, human_turns=found.turns, next_marker=found.marker, note=found.note)
                if found.turns:
                    outcome.occurred_at = found.occurred_at
                    outcome.dedupe_id = found.dedupe_id
                out.append(outcome)
        return out


def _own_of(probe: Probe) -> Any:
    """The session's own texts, read only when a prompt is found (the probe keeps them)."""
    return lambda: probe.own().raw


def rooms() -> dict[str, SessionReader]:
    """Every registered room that reads its own sessions, by catalog id (each at its host's default place)."""
    out: dict[str, SessionReader] = {}
    for room in ROOMS.values():
        reader = room.reader()
        if not isinstance(reader, TranscriptFiles):
            out[reader.catalog_id] = reader
    return out
