"""What Pi's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import POST_TOOL_USE, SESSION_END, SESSION_START, STOP, USER_PROMPT_SUBMIT, HookAdapter

# The extension runs the hook; the answers reach the model: a prompt's in its first call's system prompt,
# PostToolUse's (every later call of the run: after a tool, a steered turn) as that call's last message.
# The rest is lifecycle. It says who sent each prompt, so a prompt needs no nudge.
HOOK = HookAdapter(
    "pi", "pi", (USER_PROMPT_SUBMIT, POST_TOOL_USE), (SESSION_START, STOP, SESSION_END), tells_sender=True
)
PROGRAM = "pi"
