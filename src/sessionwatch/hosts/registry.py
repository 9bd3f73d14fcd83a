"""Every host room sessionwatch knows, by its command-line name: the one list the monitor, the hook command
and ``install``/``uninstall``/``doctor`` go through. Adding a host is adding a room package and its line here.

Light on purpose (each room's ``__init__`` holds only its card, see ``base.Room``): the hook's quick path
reads it before anything else loads.
"""

from __future__ import annotations

from .base import Room
from .claude_code import ROOM as CLAUDE_CODE
from .codex import ROOM as CODEX
from .opencode import ROOM as OPENCODE
from .pi import ROOM as PI

ROOMS: dict[str, Room] = {r.name: r for r in (CLAUDE_CODE, CODEX, OPENCODE, PI)}
NAMES: tuple[str, ...] = tuple(ROOMS)
CATALOGS: dict[str, str] = {r.name: r.catalog for r in ROOMS.values()}  # host name -> catalog id


def room(name: str) -> Room:
    """The room of a host by its command-line name (KeyError for a name no room has)."""
    return ROOMS[name]


def of_catalog(catalog: str) -> Room | None:
    """The room whose sessions are listed in ``catalog``."""
    for r in ROOMS.values():
        if r.catalog == catalog:
            return r
    return None
