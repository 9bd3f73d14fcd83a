"""Sessions: create, read, list, reset and delete them, and their lifecycle (engine/lifecycle.py)."""

from __future__ import annotations

import uuid
from typing import Any

from .. import kinds, validation
from ..keys import SESSION_KINDS, infer_kind, parse_key
from ..listing import ListPosition, SessionPage, decode_cursor, encode_cursor
from ..notices import CONTEXT_PREFIX, context_key_for
from ..store.records import EventInput, SessionRow
from . import lifecycle
from .core import _actor
from .producers import Producers
from .reconciliation import Reconciliation


class Sessions(Producers, Reconciliation):
    """Session rows and lifecycle reports (creating one records ``created`` through the producers)."""

    lost_timer: lifecycle.LostTimer | None  # set by Gateway.__init__ (None: a read-only engine has no timer)

    # -- sessions --------------------------------------------------------------------------------
    def put_session(
        self,
        key: object,
        *,
        agent_id: object = None,
        kind: object = None,
        spawned_by: object = None,
        label: object = None,
        created_by: object = None,
    ) -> dict[str, Any]:
        skey, agent = self.resolve(key, agent_id)
        if kind is not None:
            kind = validation.one_of(kind, "kind", SESSION_KINDS)
        if spawned_by is not None:
            spawned_by = parse_key(spawned_by, "spawnedBy").raw
        label = validation.optional_name(label, "label")
        creator = _actor(created_by) if created_by is not None else None
        now = self.clock()
        row, created = self.store.put_session(
            SessionRow(
                session_key=skey,
                agent_id=agent,
                session_id=uuid.uuid4().hex,
                kind=kind or infer_kind(parse_key(skey)),
                created_at=now,
                updated_at=now,
                spawned_by=spawned_by,
                label=label,
            )
        )
        if created and creator is not None:
            self.record(
                EventInput(
                    skey,
                    agent,
                    kinds.CREATED,
                    creator[0],
                    kinds.CREATED_SUMMARY,
                    now,
                    actor_id=creator[1],
                    session_id=row.session_id,
                    dedupe_key=f"created:{agent}:{skey}:{row.session_id}",
                )
            )
        out = row.to_json()
        out["created"] = created
        return out

    def get_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        row = self.session(key, agent_id)
        out = row.to_json()
        out["stateVersion"] = self.state_version(row.session_key, row.agent_id)
        state = self.lifecycle_of(row.session_key, row.agent_id)
        if state is not None:
            out["lifecycle"] = state
        return out

    # -- lifecycle (engine/lifecycle.py) ---------------------------------------------------------
    def report_lifecycle(
        self,
        key: object,
        state: object,
        *,
        agent_id: object = None,
        pid: object = None,
        host: object = None,
        machine: object = None,
        outcome: object = None,
        at: object = None,
    ) -> dict[str, Any]:
        """A host reports what a session is doing: ``working`` (a turn runs), ``waiting`` (on a person),
        ``idle`` (the turn ended) or ``ended`` (``outcome`` ok, failed, cancelled, error or timeout).
        ``lost`` is the engine's to decide. Returns ``{sessionKey, agentId, lifecycle: {state, since},
        changed, stale, events}``; see docs/lifecycle.md."""
        return lifecycle.report(
            self, key, state, agent_id=agent_id, pid=pid, host=host, machine=machine, outcome=outcome, at=at
        )

    def report_host_gone(
        self, key: object, *, agent_id: object = None, pid: object = None, machine: object = None
    ) -> dict[str, Any]:
        """The host process ``pid`` of the session is gone (the address it bound for pushes is): a session
        working or waiting whose reported process that is becomes lost now. Returns ``{sessionKey,
        agentId, lifecycle, lost, events}``; see docs/lifecycle.md."""
        return lifecycle.host_gone(self, key, agent_id=agent_id, pid=pid, machine=machine)

    def lifecycle_of(self, session_key: str, agent_id: str) -> dict[str, Any] | None:
        """``{state, since}`` of a session, None when it never reported one."""
        row = self._host_read(lambda: self.store.get_lifecycle(session_key, agent_id), "reading the lifecycle")
        return None if row is None else row.to_json()

    def check_lost(self, now: int | None = None) -> list[dict[str, Any]]:
        """Run the lost timer's look now (``run_due`` runs it on its cadence); returns the events recorded."""
        timer = self.lost_timer or lifecycle.LostTimer(self)
        return [e.to_json() for e in timer.check(self.clock() if now is None else now)]

    def list_sessions(
        self,
        *,
        agent_id: str | None = None,
        kinds: list[str] | None = None,
        limit: int = 50,
        agents: frozenset[str] | None = None,
        cursor: str | None = None,
        lifecycle: list[str] | None = None,
    ) -> list[SessionRow]:
        """One page of sessions, newest created first (``list_sessions_page`` also gives the next cursor).
        ``agents`` given: only sessions of those agents (a scoped token's view). ``lifecycle``: only
        sessions in one of these states."""
        return self.list_sessions_page(
            agent_id=agent_id, kinds=kinds, limit=limit, agents=agents, cursor=cursor, lifecycle=lifecycle
        ).rows

    def list_sessions_page(
        self,
        *,
        agent_id: str | None = None,
        kinds: list[str] | None = None,
        limit: int = 50,
        agents: frozenset[str] | None = None,
        cursor: str | None = None,
        lifecycle: list[str] | None = None,
    ) -> SessionPage:
        """A page of sessions after ``cursor`` (a ``next_cursor`` of a page with the same ``agent_id``,
        ``kinds`` and ``lifecycle``; see ``listing.py`` for the order and what a walk guarantees). A
        malformed cursor, or one of another filter, raises ``InvalidArgument`` before anything is read."""
        states = None if lifecycle is None else sorted(set(lifecycle))
        after = None if cursor is None else decode_cursor(cursor, agent_id, kinds, states)
        scope = None if agents is None else sorted(agents)
        # One row more than asked tells whether a next page exists, so the last page has no cursor.
        rows = self._host_read(
            lambda: self.store.list_sessions(agent_id, kinds, limit + 1, agents=scope, after=after, states=states),
            "listing sessions",
        )
        if len(rows) <= limit:
            return SessionPage(rows, None)
        last = rows[limit - 1]
        position = ListPosition(last.created_at, last.session_key, last.agent_id)
        return SessionPage(rows[:limit], encode_cursor(position, agent_id, kinds, states))

    def reset_session(self, key: object, *, agent_id: object = None) -> dict[str, Any]:
        row = self.session(key, agent_id)
        new_id = uuid.uuid4().hex
        self.store.reset_session(
            row.session_key, row.agent_id, new_id, self.clock(), CONTEXT_PREFIX, self.settings.queue_cap
        )
        return self.get_session(row.session_key, row.agent_id)

    def delete_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        skey, agent = self.resolve(key, agent_id, stored=True)  # deleting creates nothing
        deleted = self.store.delete_session(skey, agent, context_key_for(skey), self.settings.queue_cap)
        return {"deleted": deleted}
