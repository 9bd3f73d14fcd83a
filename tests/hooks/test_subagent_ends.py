"""A subagent that fails ends failed, through real hook processes, with the payloads the real hosts send.

Neither host fires ``SubagentStop`` for a subagent that failed (verified with Claude Code 2.1.332 and Codex
0.171.0, its model request refused): the parent learns it, and so does the hook. Claude Code hands the
parent a ``<task-notification>`` as its next prompt (``<status>failed</status>``); Codex's ``wait_agent``
result says ``errored`` for it. The child's run ends failed (``run_failed``, outcome ``error``), its state
``ended`` with outcome ``failed``, and its parent is told once. A ``SubagentStop`` (a finished subagent)
ends it ok; a later notification of the same end changes nothing (the first end of a run counts).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

THREAD = "0b5a4f8e-6d1c-4bda-9a40-2c1f0d3e8b71"
AGENT = "ad833b3283c0dbddf"  # the host's id of the subagent (Codex: its thread id)
PARENT = f"agent:project:claude:{THREAD}"
CHILD = f"agent:project:subagent:{AGENT}"
CODEX_PARENT = f"agent:project:codex:{THREAD}"


def notification(status: str) -> str:
    """The prompt Claude Code 2.1.332 gives the parent when a background subagent stops (as captured)."""
    return (
        "<task-notification>\n"
        f"<task-id>{AGENT}</task-id>\n<tool-use-id>toolu_71bc22ea1f2f4cf59a47</tool-use-id>\n"
        f"<output-file>/tmp/claude-0/-project/{THREAD}/tasks/{AGENT}.output</output-file>\n"
        f"<status>{status}</status>\n"
        '<summary>Agent "hi" failed: Agent terminated early due to an API error: API Error: 400</summary>\n'
        "<note>A task-notification fires each time this agent stops with no live background children of its "
        "own.</note>\n</task-notification>"
    )


def wait_result(status: dict[str, Any]) -> str:
    """The ``tool_response`` of Codex 0.171.0's ``wait_agent`` (a JSON string, as captured)."""
    return json.dumps({"status": {AGENT: status}, "timed_out": False})


class Hooks:
    """The hooks of one host session whose transcript exists (so its first event adopts it, and later
    ones take the hook's quick path as for any adopted session)."""

    def __init__(self, tmp: Path, host: str) -> None:
        from tests.upstream.writers import ClaudeTranscript, CodexRollout

        self.host = host
        self.store = f"sqlite:///{tmp / 'sw.db'}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "CLAUDE_", "CODEX_"))}
        self.env["XDG_STATE_HOME"] = str(tmp / "state")
        if host == "claude-code":
            self.env["CLAUDE_CONFIG_DIR"] = str(tmp / "claude")
            claude = ClaudeTranscript(tmp / "claude", cwd="/home/dev/project", session_id=THREAD)
            claude.assistant("ready")
            self.transcript = str(claude.path)
        else:
            self.env["CODEX_HOME"] = str(tmp / "codex")
            self.transcript = str(CodexRollout(tmp / "codex", thread_id=THREAD).path)
        Gateway.open(self.store, timers=False).close()

    def run(self, event: str, **extra: Any) -> None:
        payload = {
            "session_id": THREAD,
            "transcript_path": self.transcript,
            "cwd": "/home/dev/project",
            "hook_event_name": event,
            "permission_mode": "default",
            **extra,
        }
        cmd = [*SESSIONWATCH, "--store", self.store, "hook", self.host, "--agent", "project"]
        out = subprocess.run(cmd, input=json.dumps(payload).encode(), capture_output=True, env=self.env, timeout=60)
        assert out.returncode == 0, out.stderr

    def child(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        with Gateway.open(self.store, timers=False) as gw:
            events = [e for e in gw.events_after(0, 1000) if e["sessionKey"] == CHILD]
            return gw.lifecycle_of(CHILD, "project"), events


def _ended(hooks: Hooks, outcome: str) -> list[dict[str, Any]]:
    """The child's end once it is all recorded: its state is stored first and its ``session_ended``
    recorded after, in a second transaction, so a look between the two sees the state alone."""

    def ended() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        state, events = hooks.child()
        done = state is not None and state["state"] == "ended"
        return (state, events) if done and any(e["kind"] == "session_ended" for e in events) else None

    state, events = wait_until(ended, timeout=30, what="the child ended, its session_ended recorded")
    assert state["outcome"] == outcome, state
    return events


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_failed_subagent_ends_failed_and_its_parent_is_told_once(tmp_path: Path, host: str) -> None:
    hooks = Hooks(tmp_path, host)
    parent = PARENT if host == "claude-code" else CODEX_PARENT
    hooks.run("UserPromptSubmit", prompt="delegate the greeting")
    with Gateway.open(hooks.store, timers=False) as gw:  # adopted (written after the hook answered): later
        wait_until(lambda: gw.link(parent), timeout=30, what="the parent adopted")  # events take the quick path
    hooks.run("SubagentStart", agent_id=AGENT, agent_type="general-purpose")
    if host == "claude-code":
        hooks.run("UserPromptSubmit", prompt=notification("failed"))
    else:  # a tool call of a working session: the hook's quick path must not skip it
        tool = {"tool_name": "multi_agent_v1wait_agent", "tool_input": {"targets": [AGENT]}}
        hooks.run("PostToolUse", **tool, tool_response=wait_result({"errored": '{"error": "refused"}'}))
    events = _ended(hooks, "failed")
    kinds = [e["kind"] for e in events]
    assert "run_failed" in kinds and "run_completed" not in kinds, kinds
    (ended,) = [e for e in events if e["kind"] == "session_ended"]
    assert ended["summary"] == "session ended (failed)"
    with Gateway.open(hooks.store, timers=False) as gw:
        told = [e for e in gw.peek_system_events(parent) if CHILD in e["line"]]
        assert len(told) == 1, gw.peek_system_events(parent)


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_finished_subagent_ends_ok_and_its_later_notification_changes_nothing(tmp_path: Path, host: str) -> None:
    hooks = Hooks(tmp_path, host)
    hooks.run("UserPromptSubmit", prompt="delegate the greeting")
    hooks.run("SubagentStart", agent_id=AGENT, agent_type="general-purpose")
    hooks.run("SubagentStop", agent_id=AGENT, agent_type="general-purpose", last_assistant_message="hello")
    before = _ended(hooks, "ok")
    if host == "claude-code":
        hooks.run("UserPromptSubmit", prompt=notification("completed"))
    else:
        tool = {"tool_name": "multi_agent_v1wait_agent", "tool_input": {"targets": [AGENT]}}
        hooks.run("PostToolUse", **tool, tool_response=wait_result({"completed": "hello"}))
    state, after = hooks.child()
    assert state is not None and state["outcome"] == "ok"
    assert [e["kind"] for e in after] == [e["kind"] for e in before]  # nothing more recorded


def test_what_is_not_a_subagents_end_is_left_alone() -> None:
    from sessionwatch.hosts.registry import room

    claude, codex = room("claude-code").hook, room("codex").hook
    assert claude.subagent_ends("UserPromptSubmit", {"prompt": "please look at <status>failed</status>"}) == []
    assert claude.subagent_ends("UserPromptSubmit", {"prompt": notification("running")}) == []
    assert claude.subagent_ends("PostToolUse", {"prompt": notification("failed")}) == []
    assert claude.subagent_ends("UserPromptSubmit", {"prompt": notification("failed")}) == [(AGENT, "failed")]
    assert codex.subagent_ends("PostToolUse", {"tool_name": "exec_command", "tool_response": wait_result({})}) == []
    timed_out = {"tool_name": "wait_agent", "tool_response": json.dumps({"status": {}, "timed_out": True})}
    assert codex.subagent_ends("PostToolUse", timed_out) == []
    bad = {"tool_name": "wait_agent", "tool_response": "not json"}
    assert codex.subagent_ends("PostToolUse", bad) == []
    done = {"tool_name": "wait_agent", "tool_response": wait_result({"completed": "hi"})}
    assert codex.subagent_ends("PostToolUse", done) == [(AGENT, "ok")]
