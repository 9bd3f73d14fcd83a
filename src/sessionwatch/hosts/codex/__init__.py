"""Codex CLI's room: its rollouts (``transcripts.py``: where they are; ``rows.py`` and ``stream.py``: which rows
are a person's prompt), its hooks, MCP server and hook trust in its config files (``install.py``; the trust
through ``codex app-server``: ``trust.py``), the process a TUI session lives in (``process.py``) and the push
through a TUI's daemon (``push.py``, ``daemon.py``). See docs/hooks-codex.md.

``room.py``: its hook adapter and program (what the room's own modules read); ``ROOM`` here: the card the
registry lists, with where its installer, reader, process lookup and push load from.
"""

from __future__ import annotations

from ..base import Place, Room
from .room import HOOK, PROGRAM

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..install_api import Installer
    from ..push import Channel
    from ..transcripts import TranscriptFiles


def _push() -> Channel:
    from .push import CHANNEL

    return CHANNEL


def _installer() -> Installer:
    from .install import INSTALLER

    return INSTALLER


def _reader() -> TranscriptFiles:
    from .transcripts import FILES

    return FILES


def _process() -> Callable[[int], int]:
    from .process import session_process

    return session_process


ROOM = Room(
    HOOK,
    label="Codex",
    program=PROGRAM,
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    place=Place("codex_root", "Codex home (default: $CODEX_HOME or ~/.codex)", served=True),
    push=_push,
    process=_process,
)
