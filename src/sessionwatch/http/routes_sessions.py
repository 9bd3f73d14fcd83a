"""Host operations on one session: ``/v1/sessions/{key}/...``."""

from __future__ import annotations

from typing import Any

from . import schemas
from .delivery import drain_response, with_withheld
from .endpoints import Call, Endpoint

AGENT_QUERY = {"agentId": schemas.AGENT_ID}
BASE = "/v1/sessions/{key}"


def _put(c: Call) -> Any:
    b = c.body
    return c.gw.put_session(
        c.path["key"],
        agent_id=b.get("agentId"),
        kind=b.get("kind"),
        spawned_by=b.get("spawnedBy"),
        label=b.get("label"),
        created_by=b.get("createdBy"),
    )


def _get(c: Call) -> Any:
    return c.gw.get_session(c.path["key"], c.query.get("agentId"))


def _delete(c: Call) -> Any:
    return c.gw.delete_session(c.path["key"], c.query.get("agentId"))


def _inbound(c: Call) -> Any:
    b = c.body
    return c.gw.inbound(
        c.path["key"],
        b.get("text"),
        channel=b.get("channel"),
        provenance=b.get("provenance"),
        source_session_key=b.get("sourceSessionKey"),
        human_id=b.get("humanId"),
        lane=b.get("lane"),
        occurred_at=b.get("occurredAt"),
        run_id=b.get("runId"),
        agent_id=b.get("agentId"),
        dedupe_key=b.get("dedupeKey"),
    )


def _goal(c: Call) -> Any:
    b = c.body
    return c.gw.set_goal(
        c.path["key"],
        b.get("action"),
        objective=b.get("objective"),
        status=b.get("status"),
        actor=b.get("actor"),
        agent_id=b.get("agentId"),
    )


def _begin_run(c: Call) -> Any:
    return c.gw.begin_run(c.path["key"], c.body.get("runId"), agent_id=c.body.get("agentId"))


def _end_run(c: Call) -> Any:
    return c.gw.end_run(c.path["key"], c.path["runId"], c.body.get("status"), agent_id=c.body.get("agentId"))


def _compaction(c: Call) -> Any:
    return c.gw.record_compaction(c.path["key"], c.body.get("operationId"), agent_id=c.body.get("agentId"))


def _reset(c: Call) -> Any:
    return c.gw.reset_session(c.path["key"], agent_id=c.body.get("agentId"))


def _message(c: Call) -> Any:
    b = c.body
    return c.gw.append_message(
        c.path["key"], b.get("role"), b.get("text"), agent_id=b.get("agentId"), imported=bool(b.get("imported", False))
    )


def _lifecycle(c: Call) -> Any:
    b = c.body
    return c.gw.report_lifecycle(
        c.path["key"],
        b.get("state"),
        agent_id=b.get("agentId"),
        pid=b.get("pid"),
        host=b.get("host"),
        machine=b.get("machine"),
        outcome=b.get("outcome"),
        at=b.get("at"),
    )


def _host_gone(c: Call) -> Any:
    b = c.body
    return c.gw.report_host_gone(c.path["key"], agent_id=b.get("agentId"), pid=b.get("pid"), machine=b.get("machine"))


def _peek(c: Call) -> Any:
    key, agent = c.path["key"], c.query.get("agentId")
    entries = c.gw.peek_system_events(key, agent_id=agent)
    return with_withheld(c.gw, key, agent, {"entries": entries})


def _enqueue(c: Call) -> Any:
    return c.gw.enqueue_system_event(
        c.path["key"], c.body.get("text"), context_key=c.body.get("contextKey"), agent_id=c.body.get("agentId")
    )


async def _drain(c: Call) -> Any:
    return await drain_response(c.request, c.gw, c.path["key"], c.body.get("agentId"))


def _ack(c: Call) -> Any:
    return c.gw.ack_system_events(c.path["key"], c.body.get("ids"), agent_id=c.body.get("agentId"))


def _state_version(c: Call) -> Any:
    key, agent = c.gw.resolve(c.path["key"], c.query.get("agentId"), stored=True)  # a read (keys.parse_key)
    return {"sessionKey": key, "agentId": agent, "stateVersion": c.gw.state_version(key, agent)}


def _nudge(c: Call) -> Any:
    return c.gw.nudge(c.path["key"], c.body.get("agentId"), wait_ms=c.body.get("waitMs", 0))


def _link(c: Call) -> Any:
    c.gw.resolve(c.path["key"], c.query.get("agentId"))  # a malformed key is a 400, not an upstream failure
    return {"link": c.gw.link(c.path["key"], c.query.get("agentId"))}


# Routes with a suffix come before the bare ones; every key segment is one path segment (see middleware).
ROUTES: list[Endpoint] = [
    Endpoint(
        "POST",
        f"{BASE}/inbound",
        "inbound",
        "A turn arriving in a session (a person, an agent or the "
        "system); a person's turn records human_direct_message and notifies watchers.",
        _inbound,
        body=schemas.INBOUND,
        result=schemas.R_INBOUND,
    ),
    Endpoint(
        "POST",
        f"{BASE}/goal",
        "set_goal",
        "Create, edit, change the status of, or clear the session's goal (records goal_changed).",
        _goal,
        body=schemas.GOAL,
        result=schemas.R_GOAL,
    ),
    Endpoint(
        "POST",
        f"{BASE}/runs",
        "begin_run",
        "Begin a run (the session has an active run until it ends).",
        _begin_run,
        body=schemas.RUN_BEGIN,
        result=schemas.R_RUN_BEGIN,
    ),
    Endpoint(
        "POST",
        f"{BASE}/runs/{{runId}}/end",
        "end_run",
        "End a run: run_completed (ok) or run_failed.",
        _end_run,
        body=schemas.RUN_END,
        result=schemas.R_RECORDED,
    ),
    Endpoint(
        "POST",
        f"{BASE}/compactions",
        "record_compaction",
        "Record a transcript compaction (log-only).",
        _compaction,
        body=schemas.COMPACTION,
        result=schemas.R_RECORDED,
    ),
    Endpoint(
        "POST",
        f"{BASE}/reset",
        "reset_session",
        "Reset: a new session id; the session's own cursors as a watcher are dropped.",
        _reset,
        body=schemas.AGENT_ONLY,
        result=schemas.ref("Session"),
    ),
    Endpoint(
        "POST",
        f"{BASE}/lifecycle",
        "report_lifecycle",
        "Report the session's lifecycle state: working, waiting (on a person), idle or ended. A change "
        "records one typed event (session_working, ...); an end, and a return after lost, tell the spawn "
        "parent and watchers once. The same state again only keeps the session from being lost.",
        _lifecycle,
        body=schemas.LIFECYCLE,
        result=schemas.R_LIFECYCLE,
    ),
    Endpoint(
        "POST",
        f"{BASE}/lifecycle/gone",
        "report_host_gone",
        "The session's host process is gone (the address it bound for pushes is): a session working or "
        "waiting whose reported process that is becomes lost now, telling its spawn parent and watchers "
        "once. Anything else changes nothing.",
        _host_gone,
        body=schemas.HOST_GONE,
        result=schemas.R_HOST_GONE,
    ),
    Endpoint(
        "POST",
        f"{BASE}/messages",
        "append_message",
        "Append to the transcript (an assistant message answers a waiting sessions_send).",
        _message,
        body=schemas.MESSAGE,
        result=schemas.ref("Message"),
    ),
    Endpoint(
        "GET",
        f"{BASE}/system-events",
        "peek_system_events",
        "The session's system-event queue, "
        "unchanged. Each entry has a stable id: acknowledge what you received with system-events/ack.",
        _peek,
        query=AGENT_QUERY,
        result=schemas.R_ENTRIES,
    ),
    Endpoint(
        "POST",
        f"{BASE}/system-events",
        "enqueue_system_event",
        "Queue a system event (deduplicated by context key + exact text; at most 20 per session).",
        _enqueue,
        body=schemas.ENQUEUE,
        result=schemas.R_ENQUEUED,
    ),
    Endpoint(
        "POST",
        f"{BASE}/system-events/drain",
        "drain_system_events",
        "The watcher's turn consumes its "
        "queue: returns the entries and acknowledges the stale-state notices among them.",
        _drain,
        body=schemas.AGENT_ONLY,
        result=schemas.R_ENTRIES,
        description="One call, under a lease: the entries are held for this answer (other drains skip "
        "them), acknowledged once the answer ended, freed when it did not, and back in the queue when the "
        "lease (SESSIONWATCH_DRAIN_LEASE_MS, 30 s) runs out. A client that must not lose an entry even "
        "after a complete answer peeks and acknowledges by id.",
    ),
    Endpoint(
        "POST",
        f"{BASE}/system-events/ack",
        "ack_system_events",
        "Acknowledge entries by id (from a "
        "peek): removes exactly those still queued and acknowledges the stale-state notices among them, "
        "as a drain does. Ids already gone are skipped.",
        _ack,
        body=schemas.ACK,
        result=schemas.R_ACKED,
    ),
    Endpoint(
        "GET",
        f"{BASE}/state-version",
        "state_version",
        "The session's stateVersion (0 when none).",
        _state_version,
        query=AGENT_QUERY,
        result=schemas.R_STATE_VERSION,
    ),
    Endpoint(
        "POST",
        f"{BASE}/nudge",
        "nudge_link",
        "Scan the session's adopted thread now, looking again for up to waitMs while its newest row is "
        "not written yet (what a hook calls when a prompt was submitted there).",
        _nudge,
        tag="upstream",
        body=schemas.NUDGE,
        result=schemas.ANY_OBJECT,
        thread=True,
    ),
    Endpoint(
        "GET",
        f"{BASE}/link",
        "get_link",
        "The upstream link of an adopted session (null when none).",
        _link,
        tag="upstream",
        query=AGENT_QUERY,
        result=schemas.R_LINK,
    ),
    Endpoint(
        "PUT",
        BASE,
        "put_session",
        "Create or update a session (records created only when createdBy is given).",
        _put,
        body=schemas.PUT_SESSION,
        result=schemas.ref("Session"),
    ),
    Endpoint(
        "GET",
        BASE,
        "get_session",
        "A session with its stateVersion.",
        _get,
        query=AGENT_QUERY,
        result=schemas.ref("Session"),
    ),
    Endpoint(
        "DELETE",
        BASE,
        "delete_session",
        "Delete a session (deleted: false when there was none).",
        _delete,
        query=AGENT_QUERY,
        result=schemas.R_DELETED,
    ),
]
