"""OpenCode's room: its shared SQLite database read as a catalog (``database.py``, ``reader.py``; the monitor's
view: ``catalog.py``), the plugin it loads (``plugin.js``, package data) and what that plugin records
(``sources.py``), and the files ``sessionwatch install opencode`` writes (``install.py``; with its checks:
``installer.py``). See docs/hosts-opencode.md.
"""

from __future__ import annotations

from ..base import OBSERVED, POST_TOOL_USE, SESSION_START, STOP, USER_PROMPT_SUBMIT, HookAdapter, Room

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from ..installer import Installer
    from ..readers import SessionReader


def _installer() -> Installer:
    from .installer import INSTALLER

    return INSTALLER


def _reader() -> SessionReader:
    from .catalog import OpenCodeReader

    return OpenCodeReader()


# The plugin runs the hook with these names: UserPromptSubmit as a model call is prepared (the answer goes
# into that call's system text), the rest only written down.
ROOM = Room(
    HookAdapter("opencode", "opencode", (USER_PROMPT_SUBMIT,), (SESSION_START, POST_TOOL_USE, STOP, *OBSERVED)),
    label="OpenCode",
    program="opencode",
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
)
