"""What Claude Code's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import ANSWERED, NOTIFICATION, OBSERVED, HookAdapter

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable


def _ends() -> Callable[[str, dict[str, object]], list[tuple[str, str]]]:
    from .subagents import ends  # a failed subagent's end, read from the task notification its parent gets

    return ends


HOOK = HookAdapter(
    "claude-code", "claude", ANSWERED, (*OBSERVED, NOTIFICATION), end_events=("UserPromptSubmit",), ends=_ends
)
PROGRAM = "claude"
MCP_SESSION_ENV = "CLAUDE_CODE_SESSION_ID"  # where Claude Code hands the MCP servers it starts its session's id
