"""What OpenCode's own modules know of their room: its hook adapter (the command-line and catalog names, the
events answered and observed) and its program. The package's ``ROOM`` adds where the installer and reader load
from; it sits above them, and this module below, so no module of the room imports the package that lists it.
"""

from __future__ import annotations

from ..base import OBSERVED, POST_TOOL_USE, SESSION_START, STOP, USER_PROMPT_SUBMIT, HookAdapter

# The plugin runs the hook with these names: UserPromptSubmit as a model call is prepared (the answer goes
# into that call's system text), the rest only written down.
HOOK = HookAdapter("opencode", "opencode", (USER_PROMPT_SUBMIT,), (SESSION_START, POST_TOOL_USE, STOP, *OBSERVED))
PROGRAM = "opencode"

# The MCP server OpenCode starts serves all the sessions of its process, so each call names its own (the
# plugin adds it); this variable in the server's entry tells ``sessionwatch mcp`` so. Twin of
# ``hosts.identity.PER_CALL_ENV`` (a room does not import the module above the registry).
SERVER_ENV = {"SESSIONWATCH_SESSION_PER_CALL": "opencode"}
