"""How a Claude Code subagent ended, when no ``SubagentStop`` says it.

Claude Code runs a subagent in the background and fires ``SubagentStop`` only when it finishes its work;
one that fails (an API error, for instance) fires none. Either way the parent session then gets a
``<task-notification>`` as its next prompt (a ``UserPromptSubmit`` with the parent's session id), naming
the subagent (``<task-id>``, the id its hooks carried as ``agent_id``) and how it ended (``<status>``:
``completed``, ``failed``, ``killed``). Verified with Claude Code 2.1.332.
"""

from __future__ import annotations

# <status> -> the lifecycle outcome of its end
OUTCOMES = {
    "completed": "ok",
    "failed": "failed",
    "killed": "cancelled",
    "cancelled": "cancelled",
    "stopped": "cancelled",
}
MARK = "<task-notification>"


def _tag(text: str, name: str) -> str | None:
    start = text.find(f"<{name}>")
    end = text.find(f"</{name}>", start + 1)
    if start < 0 or end < 0:
        return None
    return text[start + len(name) + 2 : end].strip()


def ends(event: str, data: dict[str, object]) -> list[tuple[str, str]]:
    """``[(host agent id, outcome)]`` of the subagents a parent's prompt says ended."""
    prompt = data.get("prompt")
    if event != "UserPromptSubmit" or not isinstance(prompt, str) or MARK not in prompt:
        return []
    out: list[tuple[str, str]] = []
    for block in prompt.split(MARK)[1:]:
        task, status = _tag(block, "task-id"), _tag(block, "status")
        if task and status in OUTCOMES:
            out.append((task, OUTCOMES[status]))
    return out
