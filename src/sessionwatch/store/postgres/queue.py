"""PostgreSQL: watch cursors and the notice queue (the ``CursorQueue`` role), over the queue functions
of postgres_functions.sql."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...keys import is_agent_qualified, is_subagent_key
from ..base import CursorQueue, Render
from ..records import (
    Cursor,
    QueueEntry,
    Taken,
    WakeRequest,
)
from ..rows import cursor_query
from .connection import PostgresConnection, named_call

log = logging.getLogger("sessionwatch.store.postgres")

_REGISTER = named_call("sw_register", "lock::bigint", "watcher", "target", "agent", "provenance", "now::bigint")


_UNWATCH = named_call("sw_unwatch", "lock::bigint", "watcher", "target", "ctx", "now::bigint", "cap::integer")


_ACK = named_call(
    "sw_ack",
    "lock::bigint",
    "watcher",
    "targets::text[]",
    "ctxs::text[]",
    "now::bigint",
    "cap::integer",
    "channel",
    "origin",
)


_ENQUEUE = named_call(
    "sw_enqueue",
    "lock::bigint",
    "session",
    "text",
    "ctx",
    "ts::bigint",
    "cap::integer",
    "quiet",
    "target",
    "ls::bigint",
)


_QUEUE = named_call("sw_queue", "session", "cap::integer")


_DRAIN = named_call(
    "sw_drain", "lock::bigint", "session", "ids::bigint[]", "cap::integer", "now::bigint", "channel", "origin"
)


_LEASE = named_call("sw_lease", "lock::bigint", "session", "holder", "now::bigint", "until::bigint", "cap::integer")


_RENEW = named_call("sw_renew_lease", "lock::bigint", "session", "holder", "ids::bigint[]", "until::bigint")


_SETTLE = named_call(
    "sw_settle",
    "lock::bigint",
    "session",
    "holder",
    "ids::bigint[]",
    "cap::integer",
    "now::bigint",
    "channel",
    "origin",
)


_RECONCILE = named_call(
    "sw_reconcile",
    "lock::bigint",
    "watcher",
    "target",
    "after::bigint",
    "last::bigint",
    "ctx",
    "now::bigint",
    "cap::integer",
    "channel",
    "origin",
)


_SWEEP = named_call("sw_sweep", "lock::bigint", "now::bigint", "cap::integer", "channel", "origin")


class PostgresQueue(PostgresConnection, CursorQueue):
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        if watcher == target or not is_agent_qualified(watcher) or not is_agent_qualified(target):
            return False
        row = self._call_one(
            _REGISTER,
            {
                "lock": self._writer,
                "watcher": watcher,
                "target": target,
                "agent": target_agent,
                "provenance": provenance,
                "now": now,
            },
        )
        return row is not None and bool(row["sw_register"])

    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        row = self._call_one(
            _UNWATCH,
            {
                "lock": self._writer,
                "watcher": watcher,
                "target": target,
                "ctx": context_key,
                "now": now,
                "cap": queue_cap,
            },
        )
        return row is not None and bool(row["sw_unwatch"])

    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]:
        query, args = cursor_query(watcher, target, "%s", self._durable_read())
        return [Cursor(*r[:-1]) for r in self._all(query, args)]

    def _wakes(self, watcher: str, reopened: Iterable[dict[str, Any]]) -> list[WakeRequest]:
        """The wakes of the reopens sw_ack queued (rows with o_target, o_quiet, o_wake_seq)."""
        waking = [r for r in reopened if not r["o_quiet"]]
        self._committed_here(r["o_wake_seq"] for r in waking)
        return [] if is_subagent_key(watcher) else [WakeRequest(watcher, r["o_target"]) for r in waking]

    def acknowledge(
        self, watcher: str, targets: Sequence[str], render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        if not targets:
            return []
        self._queue_cap = queue_cap
        last = {t: i for i, t in enumerate(targets)}  # reopen in consumption order (a repeat counts last)
        ordered = sorted(last, key=last.__getitem__)
        params = {
            "lock": self._writer,
            "watcher": watcher,
            "targets": ordered,
            "ctxs": [render(t).context_key for t in ordered],
            "now": now,
            "cap": queue_cap,
            "channel": self.channel,
            "origin": self.origin,
        }
        # Running an acknowledgment twice would acknowledge a reopen it queued: a lost flush is in doubt.
        reopened = self._durable(_ACK, params, f"acknowledging notices of {watcher!r}", many=True)
        return self._wakes(watcher, reopened)

    def enqueue(
        self,
        session_key: str,
        text: str,
        context_key: str | None,
        ts: int,
        queue_cap: int,
        queue_only: bool = False,
        notice: tuple[str, int] | None = None,
    ) -> QueueEntry | None:
        target, last_seen = notice if notice is not None else (None, None)
        params = {
            "lock": self._writer,
            "session": session_key,
            "text": text,
            "ctx": context_key,
            "ts": ts,
            "cap": queue_cap,
            "quiet": queue_only,
            "target": target,
            "ls": last_seen,
        }
        row = self._durable(
            _ENQUEUE,
            params,
            f"queueing a system event for {session_key!r}",
            # still queued: durable; gone: lost, or drained since, which cannot be told apart
            present=lambda conn, r: (r is not None and self._live(conn, session_key, [r["o_idx"]], queue_cap)) or None,
        )
        idx = None if row is None else row["o_idx"]
        if row is None or idx is None:
            return None
        if row["o_slot"]:
            return QueueEntry(idx, session_key, text, context_key, ts, queue_only, target=target)
        return QueueEntry(idx, session_key, text, context_key, ts)

    @staticmethod
    def _entries(session_key: str, rows: Iterable[dict[str, Any]], render: Render) -> list[QueueEntry]:
        """QueueEntry per row of sw_queue (or an entry row of sw_drain: the same columns)."""
        out: list[QueueEntry] = []
        for r in rows:
            if r["o_target"] is not None:  # a notice slot: its text is rendered from the target and last_seen
                t = render(r["o_target"])
                out.append(
                    QueueEntry(
                        r["o_idx"],
                        session_key,
                        t.text(r["o_ls"]),
                        t.context_key,
                        r["o_ts"],
                        r["o_quiet"],
                        target=r["o_target"],
                    )
                )
            else:
                out.append(QueueEntry(r["o_idx"], session_key, r["o_text"], r["o_ctx"], r["o_ts"]))
        return out

    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]:
        # DURABLE_READ: a client acknowledges what it peeked by id, and an id a crash took back is handed
        # out again after recovery, so a peek shows durable entries only.
        rows = self._call_all(
            _QUEUE.replace("SELECT *", f"SELECT *, {self._durable_read()} AS durable", 1),
            {"session": session_key, "cap": queue_cap},
        )
        return self._entries(session_key, rows, render)

    def drain(
        self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int, queue_cap: int
    ) -> Taken:
        self._queue_cap = queue_cap
        return self._take_and_ack(session_key, None, render, now, queue_cap)

    def acknowledge_entries(
        self,
        session_key: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken:
        self._queue_cap = queue_cap
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return Taken([], [])
        return self._take_and_ack(session_key, wanted, render, now, queue_cap)

    # -- delivery leases (sw_lease, sw_renew_lease, sw_settle) ---------------------------------------
    def lease(
        self, session_key: str, holder: str, render: Render, now: int, until: int, queue_cap: int = 20
    ) -> list[QueueEntry]:
        params = {
            "lock": self._writer,
            "session": session_key,
            "holder": holder,
            "now": now,
            "until": until,
            "cap": queue_cap,
        }
        # Run twice, a lease is the same lease (the holder's own rows are renewed); after the flush the
        # entries handed out are durable too (a crash cannot take back an entry a client was given).
        rows = self._durable(_LEASE, params, f"leasing the queue of {session_key!r}", many=True, idempotent=True)
        return self._entries(session_key, rows, render)

    def renew_lease(self, session_key: str, holder: str, ids: Sequence[int], now: int, until: int) -> bool:
        wanted = sorted({int(i) for i in ids})
        params = {"lock": self._writer, "session": session_key, "holder": holder, "ids": wanted, "until": until}
        row = self._call_one(_RENEW, params)  # run twice, a renewal is the same renewal
        return row is not None and bool(row["sw_renew_lease"])

    def release_lease(self, session_key: str, holder: str) -> None:
        # No writer lock: freeing entries early races with nothing (a lease running now just skips them).
        self._run(
            lambda c: (
                c.execute(
                    "DELETE FROM queue_leases WHERE session_key = %s AND holder = %s", (session_key, holder)
                ).rowcount
            )
        )

    def acknowledge_leased(
        self,
        session_key: str,
        holder: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken | None:
        self._queue_cap = queue_cap
        wanted = sorted({int(i) for i in ids})
        params = {
            "lock": self._writer,
            "session": session_key,
            "holder": holder,
            "ids": wanted,
            "cap": queue_cap,
            "now": now,
            "channel": self.channel,
            "origin": self.origin,
        }

        def present(conn: Any, rows: list[dict[str, Any]]) -> bool | None:
            if any(r["o_kind"] == "lost" for r in rows):
                return True  # it changed nothing: nothing to make durable
            return not self._live(conn, session_key, [r["o_idx"] for r in rows if r["o_kind"] == "entry"], queue_cap)

        rows = self._durable(
            _SETTLE, params, f"acknowledging a delivery from the queue of {session_key!r}", many=True, present=present
        )
        if any(r["o_kind"] == "lost" for r in rows):
            return None
        return self._taken(session_key, rows, render)

    def _take_and_ack(self, session_key: str, ids: list[int] | None, render: Render, now: int, queue_cap: int) -> Taken:
        """Take entries off a queue (all of them, or those with these ids) and acknowledge their notices:
        one call of sw_drain, which decodes and renders the context keys in SQL (the twins of notices.py
        there, so ``decode`` and ``render``'s keys are notices.py's), then the commit's flush wait when
        anything was taken. The notice texts are rendered here, from each slot's target and last_seen."""
        params = {
            "lock": self._writer,
            "session": session_key,
            "ids": ids,
            "cap": queue_cap,
            "now": now,
            "channel": self.channel,
            "origin": self.origin,
        }

        def taken(rows: list[dict[str, Any]]) -> list[int]:
            return [r["o_idx"] for r in rows if r["o_kind"] == "entry"]

        # After a lost flush: if none of the entries taken is still queued, the take is durable (its answer
        # stands); if they are, it died with the server and runs again. Either way no entry a client is
        # answered with is also left queued, and none is gone without reaching it.
        rows = self._durable(
            _DRAIN,
            params,
            f"taking entries off the queue of {session_key!r}",
            many=True,
            present=lambda conn, r: not self._live(conn, session_key, taken(r), queue_cap),
        )
        return self._taken(session_key, rows, render)

    def _taken(self, session_key: str, rows: list[dict[str, Any]], render: Render) -> Taken:
        """sw_drain's rows: the entries taken, the notices reopened, and whether any is withheld."""
        return Taken(
            self._entries(session_key, (r for r in rows if r["o_kind"] == "entry"), render),
            self._wakes(session_key, (r for r in rows if r["o_kind"] == "reopen")),
            any(r["o_kind"] == "withheld" for r in rows),
        )

    def _live(self, conn: Any, session_key: str, ids: Sequence[int], queue_cap: int) -> bool:
        """Is any of these entry ids queued (read with DURABLE_READ: queued durably)?"""
        got = conn.execute(
            f"SELECT EXISTS ({_QUEUE} WHERE o_idx = ANY (%(ids)s::bigint[])), {self._durable_read()}",
            {"session": session_key, "cap": queue_cap, "ids": list(ids)},
        ).fetchone()
        return bool(got[0])

    def reconcile(
        self, watcher: str, target: str, after: int, last: int, render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        self._queue_cap = queue_cap
        params = {
            "lock": self._writer,
            "watcher": watcher,
            "target": target,
            "after": after,
            "last": last,
            "ctx": render(target).context_key,
            "now": now,
            "cap": queue_cap,
            "channel": self.channel,
            "origin": self.origin,
        }
        row = self._durable(_RECONCILE, params, f"acknowledging {watcher!r}'s read of {target!r}")
        assert row is not None  # OUT parameters: always one row
        if not row["o_wake"]:
            return []
        self._committed_here([row["o_wake_seq"]])
        return [] if is_subagent_key(watcher) else [WakeRequest(watcher, target)]

    # twin: store/sqlite/queue_model.py::has_pending_notice (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/wakes.py::test_a_promoted_ambient_notice_counts_as_pending_for_the_trailing_wake)
    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        row = self._call_one(
            f"SELECT EXISTS ({_QUEUE} WHERE (o_target IS NOT NULL AND NOT o_quiet)"
            " OR o_ctx ILIKE 'session-state:%%') AS pending",
            {"session": watcher, "cap": queue_cap},
        )
        return row is not None and bool(row["pending"])

    # twin: store/sqlite/queue.py::SQLiteQueue.sweep (bound by sessionwatch/testing/stateful.py and
    #   sessionwatch/testing/sweep_prune.py::test_sweep_rematerializes_a_notice_evicted_by_the_cap)
    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        """One call of sw_sweep (it renders the context keys in SQL: notices.py's, as ``render`` gives),
        then the commit's flush wait when it queued anything."""
        self._queue_cap = queue_cap
        params = {"lock": self._writer, "now": now, "cap": queue_cap, "channel": self.channel, "origin": self.origin}
        # a sweep run twice queues what it queued once
        rows = self._durable(_SWEEP, params, "the restart sweep", many=True, idempotent=True)
        if not rows:
            return 0, []
        waking = [r for r in rows if not r["o_quiet"]]
        self._committed_here(r["o_wake_seq"] for r in waking)
        return len(rows), [
            WakeRequest(r["o_watcher"], r["o_target"]) for r in waking if not is_subagent_key(r["o_watcher"])
        ]
