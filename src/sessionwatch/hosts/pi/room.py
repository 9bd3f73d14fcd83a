"""What Pi's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import SESSION_END, SESSION_START, STOP, USER_PROMPT_SUBMIT, HookAdapter

# The extension runs the hook; only the prompt's answer reaches the model (in the system prompt), the rest
# is lifecycle. It says who sent each prompt, so a prompt needs no nudge.
HOOK = HookAdapter("pi", "pi", (USER_PROMPT_SUBMIT,), (SESSION_START, STOP, SESSION_END), tells_sender=True)
PROGRAM = "pi"
