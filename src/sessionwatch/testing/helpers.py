"""Small helpers for the conformance suite. Everything goes through the public Gateway API, so the same
tests run against every backend."""

from __future__ import annotations

import json
from typing import Any

from sessionwatch import Gateway

AGENT = "a"
MAIN = "agent:a:main"
CHILD = "agent:a:subagent:kid"  # what family() spawns
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def notice(target: str, last_seen: int) -> str:
    """The v1 notice, spelled out here rather than imported so the suite pins the exact bytes."""
    return (
        f'Session "{target}" changed (other actor). Reconcile before acting: '
        f'session_status sessionKey "{target}" changesSince {last_seen}.'
    )


def ctx(target: str) -> str:
    return "session-state:" + target.encode("utf-8").hex()


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """A tool result that must not be an error."""
    assert "error" not in result, result
    return result


def err(result: dict[str, Any], code: str) -> str:
    assert "error" in result, result
    assert result["error"]["code"] == code, result
    assert result["error"]["message"], result
    message: str = result["error"]["message"]
    return message


def spawn(gw: Gateway, parent: str, label: str, run_id: str | None = None, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"label": label, **extra}
    if run_id is not None:
        args["runId"] = run_id
    return ok(gw.call_tool("sessions_spawn", args, caller=parent))


def send(gw: Gateway, caller: str, target: str, message: str = "hi", **extra: Any) -> dict[str, Any]:
    return ok(gw.call_tool("sessions_send", {"sessionKey": target, "message": message, **extra}, caller=caller))


def status(gw: Gateway, caller: str, target: str, since: int | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"sessionKey": target}
    if since is not None:
        args["changesSince"] = since
    return ok(gw.call_tool("session_status", args, caller=caller))


def human(gw: Gateway, key: str, channel: str = "telegram", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = gw.inbound(key, "a person typed this", channel=channel, **extra)
    return out


def log(gw: Gateway, key: str | None = None, agent: str | None = None) -> list[dict[str, Any]]:
    """The whole signal log (or one session's part of it), full shape, ascending."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        page = gw.events_after(after, 1000)
        out.extend(page)
        if len(page) < 1000:
            break
        after = page[-1]["sequence"]
    return [e for e in out if (key is None or e["sessionKey"] == key) and (agent is None or e["agentId"] == agent)]


def texts(gw: Gateway, key: str, agent_id: str | None = None) -> list[str]:
    return [e["text"] for e in gw.peek_system_events(key, agent_id=agent_id)]


def cursor(gw: Gateway, watcher: str, target: str) -> dict[str, Any] | None:
    rows = gw.cursors(watcher=watcher, target=target)
    assert len(rows) <= 1
    return rows[0] if rows else None


def marks(gw: Gateway, watcher: str, target: str) -> tuple[int, int, int] | None:
    """(lastSeen, notified, material) of one cursor, or None."""
    c = cursor(gw, watcher, target)
    return None if c is None else (c["lastSeen"], c["notified"], c["material"])


def snapshot(gw: Gateway, keys: list[str]) -> str:
    """Everything a user can observe about the store, for before/after comparisons."""
    sessions = [r.to_json() for r in gw.list_sessions(limit=1000)]
    state: dict[str, Any] = {
        "log": log(gw),
        "cursors": gw.cursors(),
        "sessions": sorted(sessions, key=lambda s: (s["sessionKey"], s["agentId"])),
        "queues": {k: gw.peek_system_events(k, agent_id=AGENT) for k in keys},
        "versions": {k: gw.state_version(k, agent_id=AGENT) for k in keys},
        "history": {k: gw.call_tool("sessions_history", {"sessionKey": k, "limit": 200}, caller=MAIN) for k in keys},
    }
    return json.dumps(state, sort_keys=True)
