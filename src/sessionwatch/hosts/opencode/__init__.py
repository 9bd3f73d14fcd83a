"""OpenCode's room: its shared SQLite database read as a catalog (``database.py``, ``reader.py``; the monitor's
view: ``catalog.py``), the plugin it loads (``plugin.js``, package data) and what that plugin records
(``sources.py``), and the files ``sessionwatch install opencode`` writes (``install.py``; with its checks:
``installer.py``). See docs/hosts-opencode.md.

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
    from .catalog import OpenCodeReader

    return OpenCodeReader()


ROOM = Room(
    HOOK,
    label="OpenCode",
    program=PROGRAM,
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    place=Place(
        "opencode_db",
        "OpenCode's database (default: $OPENCODE_DB, else opencode/opencode.db in $XDG_DATA_HOME or ~/.local/share)",
    ),
    mcp_session_env="SESSIONWATCH_OPENCODE_SESSION_ID",  # the plugin's notices watcher (its push) gets it
)
