"""Plain data passed between the engine and a store. No behaviour beyond serialization."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..kinds import project_payload


@dataclass(slots=True)
class EventInput:
    """One event to record. ``watchers`` are producer-known watchers (for example the spawn parent)."""

    session_key: str
    agent_id: str
    kind: str
    actor_type: str
    summary: str
    occurred_at: int
    actor_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    dedupe_key: str | None = None
    payload: dict[str, Any] | None = None
    watchers: tuple[str, ...] = ()
    only_if_watched: bool = False
    # Upstream monitor pre-condition: record only if the session's link still has this
    # (updated_at, upstream_ref_json), checked inside the recording transaction.
    expected_link: tuple[int, str] | None = None
    # The dedupe key came from a client (inbound's dedupeKey): it is unique among the agent's client keys,
    # apart from the keys sessionwatch builds (kinds.py), so a client can never claim one of those.
    client_dedupe: bool = False


@dataclass(slots=True)
class EventRecord:
    sequence: int
    session_key: str
    agent_id: str
    kind: str
    actor_type: str
    occurred_at: int
    summary: str
    actor_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    dedupe_key: str | None = None
    payload: dict[str, Any] | None = None

    def projected(self) -> dict[str, Any]:
        """The ``session_status`` shape: only the public fields, payload projected."""
        out: dict[str, Any] = {
            "sequence": self.sequence,
            "kind": self.kind,
            "actorType": self.actor_type,
            "occurredAt": self.occurred_at,
            "summary": self.summary,
        }
        if self.actor_id is not None:
            out["actorId"] = self.actor_id
        if self.run_id is not None:
            out["runId"] = self.run_id
        payload = project_payload(self.payload, self.kind)
        if payload is not None:
            out["payload"] = payload
        return out

    def to_json(self) -> dict[str, Any]:
        """The full internal shape (payload not projected)."""
        out = self.projected()
        out.update(sessionKey=self.session_key, agentId=self.agent_id)
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        if self.dedupe_key is not None:
            out["dedupeKey"] = self.dedupe_key
        if self.payload is not None:
            out["payload"] = self.payload
        return out


@dataclass(frozen=True, slots=True)
class WakeRequest:
    watcher: str
    target: str


@dataclass(slots=True)
class RecordOutcome:
    event: EventRecord | None
    inserted: bool
    wakes: list[WakeRequest] = field(default_factory=list)


@dataclass(frozen=True)
class LogBounds:
    """Where the signal log stands for a scope (every session, some agents, or one session): the earliest
    sequence still stored (``last + 1`` when none is, 0 for an empty log), the last sequence recorded, and
    the pruned watermark (the highest sequence retention removed). A reader at ``after < pruned`` missed
    events: the same ``historyGap`` fact ``changesSince`` reports."""

    earliest: int
    last: int
    pruned: int
    pruned_at: int | None = None  # when retention last ran (any process), ms; None: never

    def gap(self, after: int) -> bool:
        return after < self.pruned


@dataclass(slots=True)
class ChangesPage:
    """A ``changesSince`` page. ``events`` are dicts in the public shape ({sequence, kind, actorType,
    occurredAt, summary, actorId?, runId?, payload?}) with the FULL payload; ``to_json`` projects it."""

    events: list[dict[str, Any]]
    truncated: bool
    earliest_available_sequence: int
    history_gap: bool

    def to_json(self) -> dict[str, Any]:
        events = []
        for e in self.events:
            if "payload" in e:
                e = dict(e)
                projected = project_payload(e.pop("payload"), e.get("kind"))
                if projected is not None:
                    e["payload"] = projected
            events.append(e)
        return {
            "events": events,
            "truncated": self.truncated,
            "earliestAvailableSequence": self.earliest_available_sequence,
            "historyGap": self.history_gap,
        }


EMPTY_PAGE = ChangesPage([], False, 0, False)


@dataclass(slots=True)
class Cursor:
    watcher: str
    target: str
    last_seen: int
    notified: int
    material: int
    provenance: str
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "watcher": self.watcher,
            "target": self.target,
            "lastSeen": self.last_seen,
            "notified": self.notified,
            "material": self.material,
            "provenance": self.provenance,
            "updatedAt": self.updated_at,
        }


@dataclass(slots=True)
class QueueEntry:
    id: int
    session_key: str
    text: str
    context_key: str | None
    ts: int
    queue_only: bool = False
    target: str | None = None  # set for stale-state notices


@dataclass(slots=True)
class Taken:
    """What one drain or acknowledgment took off a queue: the entries, the wakes of the notices it reopened,
    and ``withheld``: after it, some lagging pair of the watcher has no live notice (the queue cap evicted
    it), so the engine queues those again (engine/evicted.py)."""

    entries: list[QueueEntry]
    wakes: list[WakeRequest]
    withheld: bool = False


@dataclass(slots=True)
class SessionRow:
    session_key: str
    agent_id: str
    session_id: str
    kind: str
    created_at: int
    updated_at: int
    spawned_by: str | None = None
    label: str | None = None
    active_run_id: str | None = None
    goal: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionKey": self.session_key,
            "agentId": self.agent_id,
            "sessionId": self.session_id,
            "kind": self.kind,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }
        if self.spawned_by is not None:
            out["spawnedBy"] = self.spawned_by
        if self.label is not None:
            out["label"] = self.label
        if self.active_run_id is not None:
            out["activeRunId"] = self.active_run_id
        if self.goal is not None:
            out["goal"] = self.goal
        return out


@dataclass(slots=True)
class MessageRow:
    id: int
    session_key: str
    agent_id: str
    role: str
    text: str
    created_at: int
    provenance: str | None = None
    source_session_key: str | None = None
    channel: str | None = None
    imported: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "role": self.role, "text": self.text, "ts": self.created_at}
        if self.provenance is not None:
            out["provenance"] = self.provenance
        if self.source_session_key is not None:
            out["sourceSessionKey"] = self.source_session_key
        if self.channel is not None:
            out["channel"] = self.channel
        if self.imported:
            out["imported"] = True
        return out


@dataclass(slots=True)
class PruneResult:
    rows_deleted: int = 0
    cursors_deleted: int = 0
    heads_stamped: int = 0
    skipped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "rowsDeleted": self.rows_deleted,
            "cursorsDeleted": self.cursors_deleted,
            "headsStamped": self.heads_stamped,
            "skipped": self.skipped,
        }


@dataclass(slots=True)
class Link:
    """An adopted catalog thread linked to a session."""

    session_key: str
    agent_id: str
    catalog_id: str
    host_id: str
    thread_id: str
    upstream_kind: str
    upstream_ref: dict[str, Any]
    marker: dict[str, Any]
    created_at: int
    updated_at: int
    last_scanned_at: int | None = None
    miss_count: int = 0
    miss_link_updated_at: int | None = None

    def source(self) -> tuple[str, str, str, str, str]:
        """What makes two links "the same source": a continue onto it keeps progress, else rebases."""
        return self.catalog_id, self.thread_id, self.host_id, self.upstream_kind, dumps(self.upstream_ref)

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionKey": self.session_key,
            "agentId": self.agent_id,
            "catalogId": self.catalog_id,
            "hostId": self.host_id,
            "threadId": self.thread_id,
            "upstreamKind": self.upstream_kind,
            "upstreamRef": self.upstream_ref,
            "marker": self.marker,
            "lastScannedAt": self.last_scanned_at,
            "missCount": self.miss_count,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


@dataclass(slots=True)
class Node:
    node_id: str
    url: str
    token: str
    created_at: int
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return {"nodeId": self.node_id, "url": self.url, "createdAt": self.created_at, "updatedAt": self.updated_at}


def dumps(value: Any) -> str:
    """Compact JSON text. orjson is several times faster; the stdlib covers what it refuses (huge ints)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    return orjson.loads(text)


def loads_or_none(text: str | None) -> Any:
    return None if text is None else loads(text)


@dataclass(slots=True)
class TokenRow:
    """A bearer token as stored: only its SHA-256 hash, never the token itself."""

    token_id: str
    token_hash: str  # hex SHA-256 of the whole token text
    name: str | None
    agents: tuple[str, ...]  # empty for an admin token
    admin: bool
    created_at: int
    revoked_at: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.token_id,
            "name": self.name,
            "agents": list(self.agents),
            "admin": self.admin,
            "createdAt": self.created_at,
            "revokedAt": self.revoked_at,
            "revoked": self.revoked_at is not None,
        }


@dataclass(slots=True)
class LifecycleRow:
    """A session's lifecycle state (docs/lifecycle.md): ``since`` when it entered the state, ``seen_at``
    the last report or activity (what the lost timer measures), and the host process when reported."""

    session_key: str
    agent_id: str
    state: str
    since: int
    seen_at: int
    pid: int | None = None
    machine: str | None = None
    host: str | None = None
    outcome: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The public shape: ``{state, since}`` (plus ``outcome`` for an ended session that has one)."""
        out: dict[str, Any] = {"state": self.state, "since": self.since}
        if self.state == "ended" and self.outcome is not None:
            out["outcome"] = self.outcome
        return out


LIFECYCLE_COLS = "session_key, agent_id, state, since, seen_at, pid, machine, host, outcome"


def lifecycle_from_row(row: Any) -> LifecycleRow:
    return LifecycleRow(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8])


def apply_report(current: LifecycleRow | None, report: LifecycleRow) -> tuple[LifecycleRow | None, str]:
    """What one report does to the stored state (both stores run this inside their transaction):
    ``(row to store or None, verdict)``. Verdicts: ``new`` (first report), ``changed`` (another state),
    ``same`` (the state it is in: only the last-seen time and the process move on) and ``stale`` (older
    than the state's own start, a report that arrived late: nothing changes)."""
    if current is None:
        return report, "new"
    if current.state == report.state:
        kept = LifecycleRow(
            current.session_key,
            current.agent_id,
            current.state,
            current.since,
            max(current.seen_at, report.seen_at),
            report.pid if report.pid is not None else current.pid,
            report.machine if report.pid is not None else current.machine,
            report.host if report.host is not None else current.host,
            current.outcome,
        )
        return kept, "same"
    if report.since < current.since:
        return None, "stale"
    pid_given = report.pid is not None
    changed = LifecycleRow(
        report.session_key,
        report.agent_id,
        report.state,
        report.since,
        max(current.seen_at, report.seen_at),
        report.pid if pid_given else current.pid,
        report.machine if pid_given else current.machine,
        report.host if report.host is not None else current.host,
        report.outcome,
    )
    return changed, "changed"
