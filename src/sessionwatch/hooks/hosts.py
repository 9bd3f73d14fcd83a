"""The two hosts: which events they send, which catalog their threads live in, and the answer format.

Both hosts read a hook's answer from stdout on exit 0 as JSON ``{"hookSpecificOutput": {"hookEventName",
"additionalContext"}}`` (Claude Code: "Hooks reference", https://code.claude.com/docs/en/hooks; Codex:
"Hooks", https://developers.openai.com/codex/hooks and the published output schemas). Any other exit
code is an error to the host (exit 2 even blocks the prompt), so the hook always exits 0.
"""

from __future__ import annotations

import json
from typing import NamedTuple

SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
POST_TOOL_USE = "PostToolUse"


class Host(NamedTuple):  # not a dataclass: its import is a noticeable part of a hook run
    name: str  # as on the command line: claude-code, codex
    catalog: str  # the upstream catalog its transcripts are listed in
    events: tuple[str, ...]  # the events we answer (all three accept additionalContext)

    def answer(self, event: str, text: str) -> str:
        """The stdout of a hook that adds ``text`` to the model's context ("" adds nothing)."""
        if not text:
            return ""
        # ASCII with escapes: the host's pipe may not be UTF-8, and JSON carries any text that way
        return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}) + "\n"


HOSTS: dict[str, Host] = {
    "claude-code": Host("claude-code", "claude", (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE)),
    "codex": Host("codex", "codex", (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE)),
}
