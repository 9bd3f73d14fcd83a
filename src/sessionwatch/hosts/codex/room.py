"""What Codex's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import ANSWERED, OBSERVED, HookAdapter

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable


def _ends() -> Callable[[str, dict[str, object]], list[tuple[str, str]]]:
    from .subagents import ends  # a failed subagent's end, read from its parent's wait_agent result

    return ends


HOOK = HookAdapter("codex", "codex", ANSWERED, OBSERVED, daemon_push=True, end_events=("PostToolUse",), ends=_ends)
PROGRAM = "codex"
