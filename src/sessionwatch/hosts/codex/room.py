"""What Codex's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import ANSWERED, OBSERVED, HookAdapter

HOOK = HookAdapter("codex", "codex", ANSWERED, OBSERVED, daemon_push=True)
PROGRAM = "codex"
