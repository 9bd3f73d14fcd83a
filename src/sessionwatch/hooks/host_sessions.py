"""What a host's hook event says about its sessions, written to sessionwatch before the hook answers.

- **Which session.** ``--session`` (or ``$SESSIONWATCH_SESSION``) pins one key; else the session whose
  adoption link is this thread; else the host session's own key (``identity.zero_config_key``), which the
  first event creates and adopts (its transcript linked at its current end, so a person typing into it
  later is detected like any adopted thread). Until the host has written the transcript, the session
  exists without its link, and each later event tries the adoption again.
- **Subagents are children.** ``SubagentStart`` spawns ``agent:<agent>:subagent:<host agent id>`` from the
  session that started it (what ``sessions_spawn`` does: the parent watches it from its spawn, the run is
  the host's agent id); ``SubagentStop`` ends that run (ok), which tells the parent once. A subagent that
  failed gets no ``SubagentStop``: its parent's events say it (Claude Code's task notification, Codex's
  ``wait_agent`` result; ``HookAdapter.subagent_ends``), and the run ends failed. Every other event
  from inside a subagent (it carries the parent's session id plus ``agent_id``) belongs to the subagent:
  what the hook delivers there is the subagent's own, never the parent's.

Each write is best-effort: a failure is logged and the hook still answers (see run.py).
"""

from __future__ import annotations

import logging
import os
from typing import Any, NamedTuple, Protocol

from ..hosts.identity import agent_of_key, host_id, subagent_key, zero_config_key
from ..hosts.registry import ROOMS

log = logging.getLogger("sessionwatch.hook")

SESSION_ENV = "SESSIONWATCH_SESSION"
AGENT_ENV = "SESSIONWATCH_AGENT"
SUBAGENT_START = "SubagentStart"
SUBAGENT_STOP = "SubagentStop"
# What each event says the session is doing (docs/lifecycle.md); Stop is decided after the answer (a
# Stop the hook blocks goes on working), SubagentStart/Stop are the subagent's own.
STATES = {
    "SessionStart": "idle",
    "UserPromptSubmit": "working",
    "PostToolUse": "working",
    "PermissionRequest": "waiting",
    "SessionEnd": "ended",
}
WAITING_NOTICES = frozenset({"permission_prompt", "elicitation_dialog"})  # Claude Code's Notification types
# a subagent's end (a lifecycle outcome) as its run's end (kinds.RUN_STATUSES: a run has no "failed")
RUN_STATUS = {"ok": "ok", "failed": "error", "error": "error", "cancelled": "cancelled", "timeout": "timeout"}


class Who(NamedTuple):
    key: str  # the host session's sessionwatch key (the parent, for an event from inside a subagent)
    agent: str | None
    source: str  # --session, SESSIONWATCH_SESSION, adoption link, host session id
    linked: bool  # its adoption link to this very thread exists (nothing to adopt)


class Writes(Protocol):
    """What a hook writes, on whichever backend it runs (the local engine, a gateway, the gateway itself)."""

    def adopt(self, key: str, catalog: str, thread_id: str) -> dict[str, Any]: ...
    def spawn_child(self, parent: str, child: str, run_id: str) -> dict[str, Any]: ...
    def end_child(self, child: str, run_id: str, outcome: str = "ok") -> dict[str, Any]: ...
    def lifecycle(self, key: str, state: str, report: Report) -> dict[str, Any]: ...
    def prompt(self, key: str, text: str, person: bool) -> dict[str, Any]: ...


class Report(NamedTuple):
    """Who reports a lifecycle state: the host, its process (None through an HTTP hook), when."""

    host: str
    at: int  # ms since the epoch, taken as the hook started: of two racing reports the later one wins
    pid: int | None = None
    machine: str | None = None
    outcome: str | None = None


def resolve(
    host: str, session: str | None, agent: str | None, data: dict[str, Any], links: list[dict[str, Any]]
) -> Who | None:
    """The session a hook input stands for, or None (no key given, no link, no usable session id)."""
    agent = agent or os.environ.get(AGENT_ENV) or None
    if session:
        return Who(session, agent, "--session", True)
    env = os.environ.get(SESSION_ENV)
    if env:
        return Who(env, agent, SESSION_ENV, True)
    if links:
        return Who(links[0]["sessionKey"], links[0]["agentId"], "adoption link", True)
    key = zero_config_key(host, agent, data)
    if key is None:
        return None
    return Who(key, None, "host session id", False)


def child_key(who: Who, data: dict[str, Any]) -> str | None:
    """The subagent's key when the input comes from inside one (``agent_id``), else None."""
    sub = host_id(data.get("agent_id"))
    if sub is None:
        return None
    return subagent_key(agent_of_key(who.key) or who.agent or "main", sub)


def adopted(backend: Writes, catalog: str, data: dict[str, Any], who: Who) -> Who:
    """A host session's own key, created and adopted when it was not linked yet (best-effort)."""
    thread = host_id(data.get("session_id"))
    if not who.linked and thread is not None:
        _best_effort(
            f"adopting {catalog} thread {thread} as {who.key}", lambda: backend.adopt(who.key, catalog, thread)
        )
    return who._replace(linked=True)


def apply(backend: Writes, catalog: str, event: str, data: dict[str, Any], who: Who, report: Report) -> str:
    """Write what the event says; the key whose notices the hook may deliver for it (the subagent's
    own key for an event from inside a subagent)."""
    who = adopted(backend, catalog, data, who)
    child = child_key(who, data)
    if child is None:
        state = STATES.get(event)
        if event == "Notification":
            state = "waiting" if data.get("notification_type") in WAITING_NOTICES else None
        if event == "SessionStart" and data.get("source") == "compact":
            state = None  # a compaction in the middle of a turn: still working
        if state is not None:
            _report(backend, who.key, state, report._replace(outcome="ok" if state == "ended" else None))
        hook = ROOMS[report.host].hook if report.host in ROOMS else None
        for sub, outcome in hook.subagent_ends(event, data) if hook is not None else ():
            host_sub = host_id(sub)
            if host_sub is not None:  # a subagent that ended without a SubagentStop (a failed one gets none)
                _end_child(
                    backend,
                    subagent_key(agent_of_key(who.key) or who.agent or "main", host_sub),
                    host_sub,
                    outcome,
                    report,
                )
        if hook is not None and hook.daemon_push and event in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
            _where_it_runs(who.key, data, event, report)
        if hook is not None and hook.tells_sender and event == "UserPromptSubmit":
            told_prompt(backend, who.key, data)
        return who.key
    run = str(data["agent_id"])
    if event == SUBAGENT_START:
        _best_effort(f"spawning {child} from {who.key}", lambda: backend.spawn_child(who.key, child, run))
        _report(backend, child, "working", report)
    elif event == SUBAGENT_STOP:
        if data.get("agent_type") != "":  # Claude Code's compaction fires one with no subagent
            # a stop says nothing of how it went: the hosts fire it only for a subagent that finished its
            # work (a failed one's end comes from its parent's events: HookAdapter.subagent_ends)
            _end_child(backend, child, run, "ok", report)
    elif event in ("PostToolUse", "PermissionRequest"):
        _report(backend, child, STATES[event], report)
    return child


def _end_child(backend: Writes, child: str, run: str, outcome: str, report: Report) -> None:
    """The subagent's run ends (the first end of a run counts) and its state is ended with ``outcome``."""
    _best_effort(f"ending {child} ({outcome})", lambda: backend.end_child(child, run, outcome))
    _report(backend, child, "ended", report._replace(outcome=outcome))


def told_prompt(backend: Writes, key: str, data: dict[str, Any]) -> None:
    """Pi's extension says who sent the prompt (its ``input`` event): typed in the TUI (``interactive``,
    with a UI) is a person's, recorded as ``human_direct_message``; anything else (``pi -p``, RPC, an
    extension) a program's. Either way the text becomes one of the session's own, so the monitor reading
    the file after Pi wrote it never counts the prompt a second time, nor a program's as a person's."""
    text = data.get("prompt")
    if not isinstance(text, str) or not text.strip():
        return
    person = data.get("prompt_source") == "interactive" and data.get("has_ui") is True
    _best_effort(
        f"{key}: a prompt from {'a person' if person else 'a program'}", lambda: backend.prompt(key, text, person)
    )


def turn_ended(backend: Writes, key: str, report: Report, data: dict[str, Any] | None = None) -> None:
    """A Stop the hook did not block: the turn is over."""
    _report(backend, key, "idle", report)
    if report.host in ROOMS and ROOMS[report.host].hook.daemon_push and data is not None:
        _where_it_runs(key, data, "Stop", report)


def _where_it_runs(key: str, data: dict[str, Any], event: str, report: Report) -> None:
    """Where the session runs, for its MCP server's push (a Codex TUI's thread and daemon:
    the room's push channel). Only a hook run on the host's machine knows (not a gateway answering an
    HTTP hook: its report has no pid)."""
    channel = ROOMS[report.host].push_channel() if report.pid is not None else None
    if channel is None:
        return
    from .host_process import host_pid

    try:
        channel.register(key, data, event, host_pid(), report.at)
    except OSError as exc:  # no push then; the notices still come with the next hook
        log.warning("registering where %s runs, for the push, failed: %s", key, exc)


def _report(backend: Writes, key: str, state: str, report: Report) -> None:
    _best_effort(f"{key} is {state}", lambda: backend.lifecycle(key, state, report))


def _best_effort(what: str, fn: Any) -> None:
    try:
        out = fn()
        log.info("%s: %s", what, _brief(out))
    except Exception as exc:  # noqa: BLE001 - the hook answers whatever happens here
        log.warning("%s failed: %s: %s", what, exc.__class__.__name__, exc)


def _brief(out: object) -> object:
    if isinstance(out, dict):
        if "error" in out:
            return out["error"]
        return {k: out[k] for k in ("sessionKey", "linked", "recorded", "reason", "runId", "changed") if k in out}
    return out
