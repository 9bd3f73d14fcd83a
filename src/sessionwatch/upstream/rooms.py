"""Catalogs that live in a host room (``sessionwatch.hosts.<host>``), seen from the monitor and adoption.

A room knows its host's files; this adapter gives the monitor a ``Provider`` over them and adoption a
``locate``/``baseline`` pair, the same shape as the Claude and Codex catalogs. Room catalogs are local to
this machine: a paired node does not serve them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import NotFound
from ..hosts import pi as pi_room
from .probes import ACTIVITY, Outcome, Probe, missing

log = logging.getLogger("sessionwatch.upstream")


Adopted = tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]
"""((upstream kind, ref, marker), None) for an adoption, or (None, why it cannot be linked now)."""


class Located(Protocol):
    thread_id: str
    path: str


class RoomCatalog(Protocol):
    """What the monitor, adoption and ``threads`` ask of a host room's catalog."""

    catalog_id: str

    def adopt(self, thread_id: str) -> Adopted:
        """The link's baseline; NotFound when the room has no such thread."""
        ...

    def list_threads(self) -> list[dict[str, Any]]: ...
    def provider(self, window: int, budget_s: float) -> Any: ...


class PiCatalog:
    """Pi's session files (``hosts.pi``): ``root`` is the agent dir (default ``$PI_CODING_AGENT_DIR`` or
    ``~/.pi/agent``)."""

    catalog_id = pi_room.CATALOG
    upstream_kind = pi_room.UPSTREAM_KIND

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.sessions = pi_room.PiSessions(root)

    @property
    def base(self) -> Any:
        return self.sessions.base

    def locate(self, thread_id: str) -> Located | None:
        return self.sessions.locate(thread_id)

    def adopt(self, thread_id: str) -> Adopted:
        """The session's file, and the room's baseline cursor on it."""
        try:
            found = self.locate(thread_id)
        except OSError as exc:
            return None, f"listing the {self.catalog_id} catalog failed: {exc.strerror or exc}"
        if found is None:
            raise NotFound(f"no {self.catalog_id} thread {thread_id!r} under {self.base}")
        try:
            marker = pi_room.baseline(found.path)
        except OSError as exc:
            return None, f"cannot read {found.path} for a baseline: {exc.strerror or exc}"
        return (self.upstream_kind, {"filePath": found.path}, marker), None

    def list_threads(self) -> list[dict[str, Any]]:
        return self.sessions.list_threads(include_paths=True)

    def provider(self, window: int, budget_s: float) -> PiFiles:
        return PiFiles(window, budget_s)


class PiFiles:
    """The monitor's provider for Pi links: each file read from its cursor (the link's marker)."""

    def __init__(self, window: int, budget_s: float) -> None:
        self.window = window
        self.budget_s = budget_s

    def scan(self, probes: list[Probe]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        deadline = time.monotonic() + self.budget_s
        for probe in probes:
            path = probe.link.upstream_ref.get("filePath")
            if not isinstance(path, str):
                out.append(None)
                continue
            try:
                found = pi_room.scan(path, probe.link.marker, _own_of(probe), window=self.window, deadline=deadline)
            except Exception:
                log.exception("scanning %s for %s failed", path, probe.link.session_key)
                out.append(None)
                continue
            if found.missing:
                out.append(missing(found.note or "file not found"))
            elif found.cursor is None:
                out.append(None)
            else:
                outcome = Outcome(ACTIVITY, human_turns=found.turns, next_marker=found.cursor, note=found.note)
                if found.turns:
                    outcome.occurred_at = found.occurred_at
                    outcome.dedupe_id = found.dedupe_id
                out.append(outcome)
        return out


def _own_of(probe: Probe) -> Callable[[], list[str]]:
    """The session's own texts, read only when a prompt is found (the probe keeps them)."""
    return lambda: probe.own().raw


def rooms() -> dict[str, RoomCatalog]:
    """Every room catalog, by id (each at its host's default place)."""
    from .opencode import OpenCodeRoom

    return {pi_room.CATALOG: PiCatalog(), OpenCodeRoom.catalog_id: OpenCodeRoom()}
