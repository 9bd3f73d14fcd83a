"""The two hosts: which events they send, which catalog their threads live in, and the answer format.

Both hosts read a hook's answer from stdout on exit 0 as JSON ``{"hookSpecificOutput": {"hookEventName",
"additionalContext"}}`` (Claude Code: "Hooks reference", https://code.claude.com/docs/en/hooks; Codex:
"Hooks", https://developers.openai.com/codex/hooks and the published output schemas). Any other exit
code is an error to the host (exit 2 even blocks the prompt), so the hook always exits 0. On ``Stop``
both take ``{"decision": "block", "reason"}``: the turn goes on with the reason as the model's next input,
which is how a change that arrived during the turn reaches it before the turn ends (once: a Stop that
follows a block carries ``stop_hook_active`` and is never blocked again).
"""

from __future__ import annotations

import json
from typing import NamedTuple

SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
SUBAGENT_START = "SubagentStart"
SUBAGENT_STOP = "SubagentStop"
PERMISSION_REQUEST = "PermissionRequest"
NOTIFICATION = "Notification"  # Claude Code only (Codex ignores the name)
SESSION_END = "SessionEnd"


class Host(NamedTuple):  # not a dataclass: its import is a noticeable part of a hook run
    name: str  # as on the command line: claude-code, codex
    catalog: str  # the upstream catalog its transcripts are listed in
    events: tuple[str, ...]  # the events we answer
    observes: tuple[str, ...] = ()  # the events we only write down (host_sessions.apply), never answer

    def answer(self, event: str, text: str) -> str:
        """The stdout of a hook that gives ``text`` to the model ("" gives nothing): as added context, or on
        Stop as the reason the turn goes on (both hosts: ``{"decision": "block", "reason"}``)."""
        if not text:
            return ""
        # ASCII with escapes: the host's pipe may not be UTF-8, and JSON carries any text that way
        if event == STOP:
            return json.dumps({"decision": "block", "reason": text}) + "\n"
        return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}) + "\n"


ANSWERED = (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE, STOP)
OBSERVED = (SUBAGENT_START, SUBAGENT_STOP, PERMISSION_REQUEST, SESSION_END)  # lifecycle (host_sessions)
HOSTS: dict[str, Host] = {
    "claude-code": Host("claude-code", "claude", ANSWERED, (*OBSERVED, NOTIFICATION)),
    "codex": Host("codex", "codex", ANSWERED, OBSERVED),
    # Pi: its extension (hosts/pi/sessionwatch.ts) runs the hook; only the prompt's answer reaches the model
    # (in the system prompt), the rest is lifecycle
    "pi": Host("pi", "pi", (USER_PROMPT_SUBMIT,), (SESSION_START, STOP, SESSION_END)),
}
# OpenCode's plugin (hosts/opencode/plugin.js) runs the hook with these names: UserPromptSubmit as a model
# call is prepared (the answer goes into that call's system text), the rest only written down.
HOSTS["opencode"] = Host("opencode", "opencode", (USER_PROMPT_SUBMIT,), (SESSION_START, POST_TOOL_USE, STOP, *OBSERVED))
