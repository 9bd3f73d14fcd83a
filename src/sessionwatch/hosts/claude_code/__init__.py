"""Claude Code's room: its transcripts (``transcripts.py``: where they are; ``rows.py`` and ``stream.py``: which
rows are a person's prompt), and its hooks, MCP server, permission rule and server approval in its settings
files (``install.py``), the process a session lives in (``process.py``) and the push into a session's inbox
socket (``push.py``). See docs/hooks-claude-code.md.
"""

from __future__ import annotations

from ..base import ANSWERED, NOTIFICATION, OBSERVED, HookAdapter, Room

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..installer import Installer
    from ..push import Channel
    from ..transcripts import TranscriptFiles


def _ends() -> Callable[[str, dict[str, object]], list[tuple[str, str]]]:
    from .subagents import ends

    return ends


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
    HookAdapter(
        "claude-code", "claude", ANSWERED, (*OBSERVED, NOTIFICATION), end_events=("UserPromptSubmit",), ends=_ends
    ),
    label="Claude Code",
    program="claude",
    scopes=("project", "local", "user"),
    installer=_installer,
    reader=_reader,
    push=_push,
    process=_process,
)
