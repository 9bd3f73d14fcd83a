"""Producers: what records events into the signal log, best-effort.

``record`` is the one write path (a failure is logged, counted by cause in ``drops`` and returns None;
only ``StoreInDoubt`` is raised). The host operations above it (an inbound turn, a goal change, a run's
end, a compaction) validate, update the session and record the event with its producer watchers.
"""

from __future__ import annotations

import math
from typing import Any

from .. import kinds, validation
from ..errors import InvalidArgument, StoreInDoubt
from ..keys import is_agent_qualified, main_key, parse_key
from ..store.records import EventInput, EventRecord, MessageRow, RecordOutcome
from .core import _actor, failure_log
from .messaging import Messaging
from .upkeep import Upkeep
from .watching import Watching

PROVENANCES = ("external_user", "inter_session", "internal_system")


class Producers(Upkeep, Watching, Messaging):
    """Recording, and the host operations that record."""

    # -- recording (best-effort) -----------------------------------------------------------------
    def record(self, ev: EventInput) -> RecordOutcome | None:
        """Record one event. Best-effort: a failure is logged, counted and returns None. The one exception
        is ``StoreInDoubt``, re-raised: the store cannot tell whether the event was written (the connection
        to PostgreSQL broke before the commit was proven durable), and neither "recorded" nor "not recorded"
        would be true, so the caller answers "retry".

        ``ev.occurred_at`` is clamped into [now - 24 h, now]; producer watchers that are not
        agent-qualified (or equal the target) are dropped.
        """
        now = self.clock()
        ev.occurred_at = self._clamp(ev.occurred_at, now)
        if ev.watchers:
            ev.watchers = tuple(
                dict.fromkeys(w for w in ev.watchers if w and w != ev.session_key and is_agent_qualified(w))
            )
        if not is_agent_qualified(ev.session_key):
            ev.watchers = ()  # a bare 'global' target holds no cursors: it gets the log only
        obs = self.observer
        try:
            outcome = self.store.record(
                ev, self._render, now, self.settings.queue_cap, obs.counts_notices or self.wakes.has_subscribers()
            )
        except Exception as exc:
            cause = self.drops.count(exc, ev.agent_id)
            obs.recording_dropped(cause)
            if isinstance(exc, StoreInDoubt):
                failure_log.warning(
                    "recording %s for %s is in doubt (counted; the caller is told to retry): %s",
                    ev.kind,
                    ev.session_key,
                    exc,
                )
                raise
            failure_log.exception(
                "recording %s for %s failed (%s; best-effort, counted; the action goes on)",
                ev.kind,
                ev.session_key,
                cause,
            )
            return None
        if outcome is not None and outcome.inserted:
            obs.event_recorded(ev.kind)
            if obs.counts_notices and outcome.wakes:
                obs.notices_queued(len(outcome.wakes))
            if outcome.wakes:
                self.wakes.request(outcome.wakes)
            if now >= self._next_prune_at:
                self._prune_soon(now)
        return outcome

    # -- producers -------------------------------------------------------------------------------
    def inbound(
        self,
        key: object,
        text: object,
        *,
        channel: object,
        provenance: object = None,
        source_session_key: object = None,
        human_id: object = None,
        lane: object = None,
        occurred_at: object = None,
        run_id: object = None,
        agent_id: object = None,
        dedupe_key: object = None,
    ) -> dict[str, Any]:
        """A turn arriving in a session. A person's turn records ``human_direct_message`` when the
        session has a spawn parent or a watcher; a group turn first registers main's ambient watch."""
        row = self.session(key, agent_id)
        body = validation.text(text, "text")
        chan = validation.channel(channel)  # blank -> None, summarized "via unknown"
        if provenance is not None:
            provenance = validation.one_of(provenance, "provenance", PROVENANCES)
        source = parse_key(source_session_key, "sourceSessionKey").raw if source_session_key is not None else None
        human = validation.optional_name(human_id, "humanId")
        lane = validation.optional_name(lane, "lane")
        run = validation.optional_name(run_id, "runId")
        dedupe = validation.optional_name(dedupe_key, "dedupeKey")
        claimed = None if occurred_at is None else validation.number(occurred_at, "occurredAt", minimum=-math.inf)
        # Actor classification (docs/http.md, the inbound route): only a person's turn can become human_direct_message.
        if provenance == "inter_session":
            actor_type = "agent"
        elif provenance == "internal_system":
            actor_type = "system"
        elif lane == "subagent":  # the parent's own dispatch into its child
            actor_type = "agent"
        else:
            actor_type = "human"
        message_id: int | None = None
        try:  # the turn happened whatever the store says: keeping its transcript is best-effort too
            message_id = self.store.append_message(
                MessageRow(
                    0,
                    row.session_key,
                    row.agent_id,
                    "user",
                    body,
                    self.clock(),
                    provenance=provenance,
                    source_session_key=source,
                    channel=chan,
                )
            ).id
            self._notify_messages()
        except Exception:  # noqa: BLE001 - the transcript is best-effort (logged)
            failure_log.exception("storing the inbound turn of %s failed (best-effort)", row.session_key)
        event: EventRecord | None = None
        if actor_type == "human":
            if row.kind == "group":
                main = main_key(row.agent_id)
                if main != row.session_key and self.store.get_session(main, row.agent_id) is not None:
                    self._register(main, row.session_key, row.agent_id, "ambient-group")
            outcome = self.record(
                EventInput(
                    row.session_key,
                    row.agent_id,
                    kinds.HUMAN_DIRECT_MESSAGE,
                    "human",
                    kinds.human_message_summary(chan),
                    self._clamp(claimed, self.clock()),
                    actor_id=human,
                    session_id=row.session_id,
                    run_id=run,
                    dedupe_key=dedupe,
                    client_dedupe=True,
                    watchers=(row.spawned_by,) if row.spawned_by else (),
                    only_if_watched=not row.spawned_by,
                )
            )
            event = outcome.event if outcome else None
        return {
            "recorded": event is not None,
            "event": event.to_json() if event else None,
            "messageId": message_id,
            "actorType": actor_type,
        }

    def set_goal(
        self,
        key: object,
        action: object,
        *,
        objective: object = None,
        status: object = None,
        actor: object = None,
        agent_id: object = None,
    ) -> dict[str, Any]:
        row = self.session(key, agent_id)
        action = validation.one_of(action, "action", kinds.GOAL_ACTIONS)
        actor_type, actor_id = _actor(actor)
        goal = dict(row.goal or {})
        if action in ("create", "edit"):
            goal["objective"] = validation.text(objective, "objective", max_bytes=64 * 1024)
            goal.setdefault("status", "active")
        elif action == "status":
            goal["status"] = validation.name(status, "status")
        else:
            goal = {}
        if action in ("edit", "status") and not row.goal:
            raise InvalidArgument(f"session {row.session_key!r} has no goal to {action}; create it first")
        now = self.clock()
        self.store.update_session(row.session_key, row.agent_id, now, goal=goal or None)
        outcome = self.record(
            EventInput(
                row.session_key,
                row.agent_id,
                kinds.GOAL_CHANGED,
                actor_type,
                kinds.goal_summary(action, goal.get("status")),
                now,
                actor_id=actor_id,
                session_id=row.session_id,
                watchers=(row.spawned_by,) if row.spawned_by else (),
            )
        )
        return {
            "recorded": bool(outcome and outcome.event),
            "goal": goal or None,
            "event": outcome.event.to_json() if outcome and outcome.event else None,
        }

    def begin_run(self, key: object, run_id: object, *, agent_id: object = None) -> dict[str, Any]:
        row = self.session(key, agent_id)
        run = validation.name(run_id, "runId")
        self.store.update_session(row.session_key, row.agent_id, self.clock(), active_run_id=run)
        return {"sessionKey": row.session_key, "activeRunId": run}

    def end_run(self, key: object, run_id: object, status: object, *, agent_id: object = None) -> dict[str, Any]:
        """End a run: ``run_completed`` (ok) or ``run_failed`` {outcome}; the first outcome per run wins."""
        row = self.session(key, agent_id)
        run = validation.name(run_id, "runId")
        status = validation.one_of(status, "status", kinds.RUN_STATUSES)
        now = self.clock()
        was_active = self.store.end_run(row.session_key, row.agent_id, run, now)
        kind = kinds.RUN_COMPLETED if status == "ok" else kinds.RUN_FAILED
        outcome = self.record(
            EventInput(
                row.session_key,
                row.agent_id,
                kind,
                "system",
                kinds.run_end_summary(status),
                now,
                session_id=row.session_id,
                run_id=run,
                dedupe_key=kinds.run_terminal_key(row.session_key, run),
                payload=None if status == "ok" else {"outcome": status},
                watchers=(row.spawned_by,) if row.spawned_by else (),
            )
        )
        return {
            "recorded": bool(outcome and outcome.inserted),
            "wasActive": was_active,
            "event": outcome.event.to_json() if outcome and outcome.event else None,
        }

    def record_compaction(self, key: object, operation_id: object, *, agent_id: object = None) -> dict[str, Any]:
        row = self.session(key, agent_id)
        op = validation.name(operation_id, "operationId")
        outcome = self.record(
            EventInput(
                row.session_key,
                row.agent_id,
                kinds.COMPACTED,
                "system",
                kinds.COMPACTED_SUMMARY,
                self.clock(),
                session_id=row.session_id,
                dedupe_key=kinds.compacted_key(row.session_key, op),
            )
        )
        return {
            "recorded": bool(outcome and outcome.inserted),
            "event": outcome.event.to_json() if outcome and outcome.event else None,
        }
