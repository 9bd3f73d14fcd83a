"""How a Codex subagent ended, when no ``SubagentStop`` says it.

Codex fires ``SubagentStop`` only for a subagent that finished its work; one that fails (its model
request refused, for instance) fires none. The parent learns it from its ``wait_agent`` tool call (a
``multi_agent_v1`` tool; the hook's ``tool_name`` joins namespace and name): the tool's result maps each
agent id to ``{"completed": <its last message>}`` or ``{"errored": <the error>}`` (``timed_out`` when
the wait ended first; a subagent still running is not in it as either). Verified with Codex 0.171.0.
"""

from __future__ import annotations

import json

OUTCOMES = {"completed": "ok", "errored": "failed", "cancelled": "cancelled", "interrupted": "cancelled"}


def ends(event: str, data: dict[str, object]) -> list[tuple[str, str]]:
    """``[(host agent id, outcome)]`` of the subagents a parent's ``wait_agent`` result says ended."""
    tool = data.get("tool_name")
    if event != "PostToolUse" or not isinstance(tool, str) or not tool.endswith("wait_agent"):
        return []
    result = data.get("tool_response")
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:
            return []
    status = result.get("status") if isinstance(result, dict) else None
    out: list[tuple[str, str]] = []
    for agent, how in status.items() if isinstance(status, dict) else ():
        if isinstance(agent, str) and isinstance(how, dict):
            found = [OUTCOMES[k] for k in how if k in OUTCOMES]
            if len(found) == 1:
                out.append((agent, found[0]))
    return out
