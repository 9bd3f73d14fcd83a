"""Claude Code's room: its transcripts (``transcripts.py``: where they are; ``rows.py`` and ``stream.py``: which
rows are a person's prompt), and its hooks, MCP server, permission rule and server approval in its settings
files (``install.py``), the process a session lives in (``process.py``) and the push into a session's inbox
socket (``push.py``). See docs/hooks-claude-code.md.

``room.py``: its hook adapter and program (what the room's own modules read); ``ROOM`` here: the card the
registry lists, with where its installer, reader, process lookup and push load from.
"""

from __future__ import annotations

from ..base import Place, Room
from .room import HOOK, MCP_SESSION_ENV, PROGRAM

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..install_api import Installer
    from ..push import Channel
    from ..transcripts import TranscriptFiles


def _process() -> Callable[[int], int]:
    from .process import session_process

    return session_process


def _push() -> Channel:
    from .push import CHANNEL

    return CHANNEL


def _installer() -> Installer:
    from .install import INSTALLER

    return INSTALLER


def _reader() -> TranscriptFiles:
    from .transcripts import FILES

    return FILES


ROOM = Room(
    HOOK,
    label="Claude Code",
    program=PROGRAM,
    scopes=("project", "local", "user"),
    installer=_installer,
    reader=_reader,
    place=Place("claude_root", "Claude config folder (default: $CLAUDE_CONFIG_DIR or ~/.claude)", served=True),
    mcp_session_env=MCP_SESSION_ENV,
    push=_push,
    process=_process,
)
