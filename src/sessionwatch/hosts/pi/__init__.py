"""Pi's room (npm ``@mariozechner/pi-coding-agent``): its session files and its extension.

- ``sessions``: where Pi keeps one JSONL file per session, listing and finding one by id or folder.
- ``reader``: a file read from a cursor; which new entries are a person's (the conservative rule that
  needs no extension). ``catalog``: both, as the monitor's reader.
- ``sessionwatch.ts`` (package data) and ``install``: the extension ``sessionwatch install pi`` writes,
  which delivers notices into the next model call, tells who sent each prompt, and reports the lifecycle;
  ``installer``: install, uninstall and the checks.

``room.py``: its hook adapter and program (what the room's own modules read); ``ROOM`` here: the card the
registry lists, with where its installer and reader load from.
"""

from __future__ import annotations

from ..base import Place, Room
from .room import HOOK, PROGRAM

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from ..install_api import Installer
    from ..readers import SessionReader


def _installer() -> Installer:
    from .installer import INSTALLER

    return INSTALLER


def _reader() -> SessionReader:
    from .catalog import PiReader

    return PiReader()


ROOM = Room(
    HOOK,
    label="Pi",
    program=PROGRAM,
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    place=Place("pi_root", "Pi's agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)"),
    gateway_route=False,
    mcp_session_env="SESSIONWATCH_PI_SESSION_ID",  # the extension's notices watcher (its push) gets it
)
