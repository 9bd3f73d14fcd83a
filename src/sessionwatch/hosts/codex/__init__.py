"""Codex CLI's room: its rollouts (``transcripts.py``: where they are; ``rows.py`` and ``stream.py``: which rows
are a person's prompt), its hooks, MCP server and hook trust in its config files (``install.py``; the trust
through ``codex app-server``: ``trust.py``), the process a TUI session lives in (``process.py``) and the push
through a TUI's daemon (``push.py``, ``daemon.py``). See docs/hooks-codex.md.
"""

from __future__ import annotations

from ..base import ANSWERED, OBSERVED, HookAdapter, Room

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..installer import Installer
    from ..push import Channel
    from ..transcripts import TranscriptFiles


def _ends() -> Callable[[str, dict[str, object]], list[tuple[str, str]]]:
    from .subagents import ends

    return ends


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
    HookAdapter("codex", "codex", ANSWERED, OBSERVED, daemon_push=True, end_events=("PostToolUse",), ends=_ends),
    label="Codex",
    program="codex",
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    push=_push,
    process=_process,
)
