"""Codex CLI's room: its rollouts (``transcripts.py``: where they are; ``rows.py`` and ``stream.py``: which rows
are a person's prompt), and its hooks, MCP server and hook trust in its config files (``install.py``; the trust
through ``codex app-server``: ``trust.py``), and the process a TUI session lives in (``process.py``). See docs/hooks-codex.md.
"""

from __future__ import annotations

from ..base import ANSWERED, OBSERVED, HookAdapter, Room

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..installer import Installer
    from ..transcripts import TranscriptFiles


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
    HookAdapter("codex", "codex", ANSWERED, OBSERVED, daemon_push=True),
    label="Codex",
    program="codex",
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    process=_process,
)
