"""PostgreSQL: the signal log (the ``SignalLog`` role): record, event reads and pages, heads,
retention. Recording and pruning are functions of postgres_functions.sql, called here by name."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ...keys import is_subagent_key
from ...kinds import NOTIFY_ELIGIBLE, SEEDING
from ..base import Render, SignalLog
from ..records import (
    ChangesPage,
    EventInput,
    EventRecord,
    LogBounds,
    PruneResult,
    RecordOutcome,
    WakeRequest,
    loads,
)
from ..rows import EVENT_COLS, event_body, event_from_row
from .connection import PostgresConnection, named_call

log = logging.getLogger("sessionwatch.store.postgres")

PRUNE_BATCH = 1_000  # events deleted per prune transaction (store/sqlite/log.py PRUNE_BATCH)


CURSOR_SLICE = 5_000  # cursor rows the stale-cursor cleanup examines per prune


_RECORD = named_call(
    "sw_record",
    "lock::bigint",
    "dedupe",
    "key",
    "session_id",
    "agent",
    "kind",
    "actor_type",
    "actor_id",
    "run_id",
    "occurred_at::bigint",
    "summary",
    "body",
    "watchers::text[]",
    "only_if_watched",
    "mode::integer",
    "ctx",
    "now::bigint",
    "cap::integer",
    "channel",
    "origin",
    "link_updated_at::bigint",
    "link_ref",
    "client_dedupe",
)


_PRUNE = named_call(
    "sw_prune",
    "prune_lock::bigint",
    "lock::bigint",
    "now::bigint",
    "cutoff::bigint",
    "max_rows::bigint",
    "force",
    "interval::bigint",
    "cap::integer",
)


_PRUNE_STEP = named_call(
    "sw_prune_step",
    "prune_lock::bigint",
    "lock::bigint",
    "cutoff::bigint",
    "max_rows::bigint",
    "batch::integer",
    "slice::integer",
    "cap::integer",
)


# One call, one snapshot (sw_changes is STABLE, so its reads share the calling statement's snapshot): the
# page (stored bodies concatenated), its size, the head and the oldest retained sequence.
_CHANGES = named_call("sw_changes", "key", "agent", "after::bigint", "limit::bigint")


def _recorded_event(row: Mapping[str, Any]) -> EventRecord:
    """The event sw_record returned (o_* columns), as a record."""
    return EventRecord(
        sequence=row["o_sequence"],
        session_key=row["o_session_key"],
        agent_id=row["o_agent_id"],
        kind=row["o_kind"],
        actor_type=row["o_actor_type"],
        occurred_at=row["o_occurred_at"],
        summary=row["o_summary"],
        actor_id=row["o_actor_id"],
        session_id=row["o_session_id"],
        run_id=row["o_run_id"],
        dedupe_key=row["o_dedupe_key"],
        payload=loads(row["o_body"]).get("payload"),
    )


class PostgresLog(PostgresConnection, SignalLog):
    def record(
        self, ev: EventInput, render: Render, now: int, queue_cap: int, want_wakes: bool
    ) -> RecordOutcome | None:
        self._queue_cap = queue_cap
        key = ev.session_key
        mode = 1 if ev.kind in SEEDING else 2 if ev.kind in NOTIFY_ELIGIBLE else 0
        link_updated_at, link_ref = ev.expected_link or (None, None)
        params = {
            "lock": self._writer,
            "dedupe": ev.dedupe_key,
            "key": key,
            "session_id": ev.session_id,
            "agent": ev.agent_id,
            "kind": ev.kind,
            "actor_type": ev.actor_type,
            "actor_id": ev.actor_id,
            "run_id": ev.run_id,
            "occurred_at": ev.occurred_at,
            "summary": ev.summary,
            "body": event_body(ev),
            "watchers": list(ev.watchers),
            "only_if_watched": ev.only_if_watched,
            "mode": mode,
            "ctx": render(key).context_key if mode == 2 else None,
            "now": now,
            "cap": queue_cap,
            "channel": self.channel,
            "origin": self.origin,
            "link_updated_at": link_updated_at,
            "link_ref": link_ref,
            "client_dedupe": ev.client_dedupe,
        }

        def present(conn: Any, found: dict[str, Any] | None) -> bool | None:
            """Is the event the lost connection answered with there (the very row: a sequence a crash took
            back may be handed out again)? With a dedupe key, the row of that sequence holding the key (of
            this agent and origin): the answer may be a duplicate, recorded first by another call. Read
            with DURABLE_READ, so "there" means durable."""
            if found is None or found["o_sequence"] is None:
                return None
            if ev.dedupe_key is not None:
                which = "agent_id = %s AND dedupe_key = %s AND client_dedupe = %s"
                args: tuple[Any, ...] = (ev.agent_id, ev.dedupe_key, ev.client_dedupe)
            else:
                which = "session_key = %s AND agent_id = %s AND kind = %s AND body = %s"
                args = (key, ev.agent_id, ev.kind, params["body"])
            got = conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM events WHERE sequence = %s AND {which}), {self._durable_read()}",
                (found["o_sequence"], *args),
            ).fetchone()
            return bool(got[0])

        # A duplicate dedupe key answers with the event recorded first, which another process may have
        # committed a moment ago: the flush covers that answer too. With a dedupe key a lost connection is
        # simply retried: the key makes the second run find the first.
        row = self._durable(
            _RECORD, params, f"recording {ev.kind} for {key!r}", present=present, idempotent=ev.dedupe_key is not None
        )
        if row is None:
            return None
        if not row["o_inserted"]:  # a duplicate dedupe key: the event recorded first
            return RecordOutcome(None if row["o_sequence"] is None else _recorded_event(row), False)
        wakes: list[WakeRequest] = []
        if row["o_wakes"]:
            self._committed_here(set(row["o_wake_seqs"]))
            if want_wakes:
                wakes = [WakeRequest(w, key) for w in row["o_wakes"] if not is_subagent_key(w)]
        return RecordOutcome(
            EventRecord(
                row["o_sequence"],
                key,
                ev.agent_id,
                ev.kind,
                ev.actor_type,
                ev.occurred_at,
                ev.summary,
                ev.actor_id,
                ev.session_id,
                ev.run_id,
                ev.dedupe_key,
                ev.payload,
            ),
            True,
            wakes,
        )

    def changes_since(self, session_key: str, agent_id: str, after: int, limit: int) -> ChangesPage:
        row = self._call_one(
            _CHANGES.replace(
                "SELECT *", f"SELECT *, CASE WHEN o_count > 0 THEN {self._durable_read()} END AS durable", 1
            ),
            {"key": session_key, "agent": agent_id, "after": after, "limit": limit + 1},
        )
        assert row is not None  # OUT parameters: always one row
        count, earliest = row["o_count"], row["o_earliest"]
        events = loads(row["o_page"]) if count else []
        if count > limit:
            events.pop()
        last, pruned = row["o_last"] or 0, row["o_pruned"] or 0
        if earliest is None:
            earliest = last + 1 if last > 0 else 0
        return ChangesPage(events, count > limit, earliest, after < pruned)

    def events_after(self, after: int, limit: int, agents: Sequence[str] | None = None) -> list[EventRecord]:
        if agents is not None:
            return [
                event_from_row(r)
                for r in self._all(
                    f"SELECT {EVENT_COLS}, {self._durable_read()} FROM events"
                    " WHERE sequence > %s::bigint AND agent_id = ANY (%s::text[])"
                    " ORDER BY sequence LIMIT %s::bigint",
                    (after, list(agents), limit),
                )
            ]
        return [
            event_from_row(r)
            for r in self._all(
                f"SELECT {EVENT_COLS}, {self._durable_read()} FROM events WHERE sequence > %s::bigint"
                " ORDER BY sequence LIMIT %s::bigint",
                (after, limit),
            )
        ]

    def log_bounds(self, agents: Sequence[str] | None = None, session: tuple[str, str] | None = None) -> LogBounds:
        args: list[Any]
        if session is not None:
            where, args = "session_key = %s AND agent_id = %s", list(session)
        elif agents is not None:
            where, args = "agent_id = ANY (%s::text[])", [list(agents)]
        else:
            where, args = "TRUE", []
        last, pruned, first, top, pruned_at, _ = self._one(
            f"SELECT coalesce(max(last_sequence), 0), coalesce(max(pruned_max_sequence), 0),"
            f" (SELECT min(sequence) FROM events WHERE {where}), (SELECT max(sequence) FROM events WHERE {where}),"
            " (SELECT value FROM meta WHERE key = 'last_prune_at'),"
            f" {self._durable_read()} FROM heads WHERE {where}",
            args * 3,
        )
        last = max(int(last), int(top or 0))
        return LogBounds(
            int(first) if first is not None else (last + 1 if last else 0),
            last,
            int(pruned),
            int(pruned_at) if pruned_at is not None else None,
        )

    def state_version(self, session_key: str, agent_id: str) -> int:
        row = self._one(
            f"SELECT last_sequence, {self._durable_read()} FROM heads WHERE session_key = %s AND agent_id = %s",
            (session_key, agent_id),
        )
        return row[0] if row else 0

    def state_versions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        keys = sorted({k for k, _ in pairs})
        if not keys:
            return {}
        found = {
            (k, a): v
            for k, a, v, _ in self._all(
                f"SELECT session_key, agent_id, last_sequence, {self._durable_read()} FROM heads"
                " WHERE session_key = ANY (%s::text[])",
                (keys,),
            )
        }
        return {p: found[p] for p in pairs if p in found}

    def prune(
        self,
        now: int,
        retention_ms: int,
        max_rows: int,
        *,
        force: bool,
        interval_ms: int,
        queue_cap: int = 20,
        expire_cursors: bool = True,
    ) -> PruneResult:
        """The claim (sw_prune), then bounded steps (sw_prune_step), each its own short transaction so
        recordings never wait long for the writer lock: events in batches of PRUNE_BATCH, then one slice
        of the stale-cursor cleanup."""
        claim = self._call_one(
            _PRUNE,
            {
                "prune_lock": self._prune_key,
                "lock": self._writer,
                "now": now,
                "cutoff": now - retention_ms,
                "max_rows": max_rows,
                "force": force,
                "interval": interval_ms,
                "cap": queue_cap,
            },
        )
        assert claim is not None  # OUT parameters: always one row
        result = PruneResult(
            rows_deleted=claim["o_rows_deleted"],
            cursors_deleted=claim["o_cursors_deleted"],
            heads_stamped=claim["o_heads_stamped"],
            skipped=claim["o_skipped"],
        )
        if result.skipped:
            return result
        for slice_rows in (0, CURSOR_SLICE) if expire_cursors else (0,):
            more = True
            while more:
                step = self._call_one(
                    _PRUNE_STEP,
                    {
                        "prune_lock": self._prune_key,
                        "lock": self._writer,
                        "cutoff": now - retention_ms,
                        "max_rows": max_rows,
                        "batch": PRUNE_BATCH,
                        "slice": slice_rows,
                        "cap": queue_cap,
                    },
                )
                assert step is not None
                result.rows_deleted += step["o_rows_deleted"]
                result.cursors_deleted += step["o_cursors_deleted"]
                result.heads_stamped += step["o_heads_stamped"]
                more = bool(step["o_more"])
        return result
