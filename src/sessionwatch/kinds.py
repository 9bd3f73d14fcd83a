"""The closed set of event kinds, who may cause them, their summaries and payload projection."""

from __future__ import annotations

from typing import Any

HUMAN_DIRECT_MESSAGE = "human_direct_message"
GOAL_CHANGED = "goal_changed"
UPSTREAM_MISSING = "upstream_missing"
CHILD_SPAWNED = "child_spawned"
RUN_COMPLETED = "run_completed"
RUN_FAILED = "run_failed"
COMPACTED = "compacted"
CREATED = "created"
ADOPTED = "adopted"
IMPORTED = "imported"
# Lifecycle (beyond v1): a session's own state changes, content-free (see docs/lifecycle.md).
SESSION_WORKING = "session_working"
SESSION_WAITING = "session_waiting"
SESSION_IDLE = "session_idle"
SESSION_ENDED = "session_ended"
SESSION_LOST = "session_lost"
SESSION_BACK = "session_back"

ALL_KINDS = frozenset(
    {
        HUMAN_DIRECT_MESSAGE,
        GOAL_CHANGED,
        UPSTREAM_MISSING,
        CHILD_SPAWNED,
        RUN_COMPLETED,
        RUN_FAILED,
        COMPACTED,
        CREATED,
        ADOPTED,
        IMPORTED,
        SESSION_WORKING,
        SESSION_WAITING,
        SESSION_IDLE,
        SESSION_ENDED,
        SESSION_LOST,
        SESSION_BACK,
    }
)
# Kinds that advance watcher cursors and queue a stale notice. Of the lifecycle kinds only the end of a
# session, its loss and its return do: working/waiting/idle change with every turn and are log-only.
NOTIFY_ELIGIBLE = frozenset(
    {HUMAN_DIRECT_MESSAGE, GOAL_CHANGED, UPSTREAM_MISSING, SESSION_ENDED, SESSION_LOST, SESSION_BACK}
)
# Kinds that seed (overwrite) the producer watchers' cursors at the event's sequence.
SEEDING = frozenset({CHILD_SPAWNED})

ACTOR_TYPES = frozenset({"human", "agent", "system"})
RUN_STATUSES = ("ok", "error", "timeout", "cancelled")
GOAL_ACTIONS = ("create", "edit", "status", "clear")

# Lifecycle states: the four a host reports, and ``lost``, which only the engine decides.
REPORTED_STATES = ("working", "waiting", "idle", "ended")
LIFECYCLE_STATES = (*REPORTED_STATES, "lost")
# States the lost timer watches: a turn running, or a prompt waiting on a person.
LIVE_STATES = ("working", "waiting")
END_OUTCOMES = ("ok", "failed", "cancelled", "error", "timeout")
STATE_KINDS = {
    "working": SESSION_WORKING,
    "waiting": SESSION_WAITING,
    "idle": SESSION_IDLE,
    "ended": SESSION_ENDED,
    "lost": SESSION_LOST,
}
_STATE_SUMMARY = {
    "working": "session working",
    "waiting": "session waiting on a person",
    "idle": "session idle",
    "ended": "session ended",
    "lost": "session lost",
}
SESSION_BACK_SUMMARY = "session back"


def lifecycle_summary(state: str, outcome: str | None = None) -> str:
    base = _STATE_SUMMARY[state]
    return f"{base} ({outcome})" if state == "ended" and outcome and outcome != "ok" else base


_RUN_FAILED_SUMMARY = {
    "error": "child run failed",
    "timeout": "child run timed out",
    "cancelled": "child run cancelled",
}


def human_message_summary(channel: str | None) -> str:
    name = (channel or "").strip()
    return f"human message via {name or 'unknown'}"


def goal_summary(action: str, status: str | None = None) -> str:
    if action == "create":
        return "goal created"
    if action == "edit":
        return "goal objective changed"
    if action == "status":
        return f"goal status changed to {status}"
    return "goal cleared"


def run_end_summary(status: str) -> str:
    return "child run completed" if status == "ok" else _RUN_FAILED_SUMMARY[status]


def upstream_missing_summary(catalog_id: str) -> str:
    return f"upstream missing via {catalog_id}"


def adopted_summary(catalog_id: str) -> str:
    return f"adopted from {catalog_id}"


# -- the dedupe keys sessionwatch builds ------------------------------------------------------------------
# Ids belong to their agent: the stores keep a dedupe key unique per (agent, origin, key), where the
# origin is a client (inbound's dedupeKey, EventInput.client_dedupe) or sessionwatch itself (the keys
# below and those of the upstream monitor: adopted:, upstream:, upstream-missing:). So a key of one agent
# never meets another agent's, and a client can send any text, one of these included, without claiming
# it. Run and operation ids also belong to their session: the key names the session, then (after a
# space, which no session key contains) the id.


def child_spawned_key(session_key: str, run_id: str) -> str:
    return f"child-spawned:{session_key} {run_id}"


def run_terminal_key(session_key: str, run_id: str) -> str:
    return f"run-terminal:{session_key} {run_id}"


def compacted_key(session_key: str, operation_id: str) -> str:
    return f"compacted:{session_key} {operation_id}"


CHILD_SPAWNED_SUMMARY = "child session spawned"
COMPACTED_SUMMARY = "session compacted"
CREATED_SUMMARY = "session created"


def project_payload(payload: dict[str, Any] | None, kind: str | None = None) -> dict[str, Any] | None:
    """What ``session_status`` shows of a payload: outcome, channel and turns only. A session's end also
    shows the outcomes ``ok`` and ``failed`` (v1 kinds never show those)."""
    if not payload:
        return None
    out: dict[str, Any] = {}
    outcome = payload.get("outcome")
    if outcome in ("error", "timeout", "cancelled") or (kind == SESSION_ENDED and outcome in ("ok", "failed")):
        out["outcome"] = outcome
    channel = payload.get("channel")
    if isinstance(channel, str) and channel:
        out["channel"] = channel
    turns = payload.get("turns")
    if isinstance(turns, int) and not isinstance(turns, bool) and 0 < turns <= 2**53 - 1:
        out["turns"] = turns
    return out or None
