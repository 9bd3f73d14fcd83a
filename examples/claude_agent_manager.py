"""Claude Agent SDK recipe: a UserPromptSubmit hook (the SDK's Python hooks) adds the manager's sessionwatch
notices, each with the exact delta it names (session_status changesSince), to the prompt's context, so
Claude reconciles before acting. `gw` is a Gateway or a GatewayClient. With Claude Code signed in:
    python examples/claude_agent_manager.py "What next?"      (pip install -e '.[recipes]')"""

import asyncio
import sys

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, query

from sessionwatch import Gateway
from sessionwatch.notices import parse_notice


def pending_context(gw, manager: str, handed: list) -> str:
    if handed:  # at least once: what the last prompt was given is acknowledged now
        gw.ack_system_events(manager, handed)
        handed.clear()
    notes = []
    for entry in gw.peek_system_events(manager):
        handed.append(entry["id"])
        notes.append(entry["line"])
        if named := parse_notice(entry["text"], entry["contextKey"]):
            args = {"sessionKey": named[0], "changesSince": named[1]}
            notes.append(gw.call_tool("session_status", args, caller=manager)["text"])
    return "\n".join(notes)


def notices_hook(gw, manager: str):
    handed = []

    async def on_prompt(hook_input, tool_use_id, context):
        text = await asyncio.to_thread(pending_context, gw, manager, handed)  # gw calls block: off the loop
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}} if text else {}

    return on_prompt


async def ask(gw, manager: str, prompt: str, transport=None) -> list:
    options = ClaudeAgentOptions(hooks={"UserPromptSubmit": [HookMatcher(hooks=[notices_hook(gw, manager)])]})
    return [message async for message in query(prompt=prompt, options=options, transport=transport)]


if __name__ == "__main__":
    with Gateway.open() as gw:  # $SESSIONWATCH_STORE or the per-user default store
        for message in asyncio.run(ask(gw, "agent:main:main", sys.argv[1])):
            print(message)
