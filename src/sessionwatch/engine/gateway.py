"""The embedded engine: host operations, recording, watches, notices, wakes and the tool entry point.

Everything here is transport-free. The HTTP, MCP and CLI faces call these methods (tools through
``call_tool``), so a result is the same JSON from every face.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sized
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import kinds, validation
from ..clock import Clock, system_clock
from ..errors import InvalidArgument, NotFound, SessionwatchError, StoreInDoubt, StoreUnavailable
from ..keys import SESSION_KINDS, check_agent_id, infer_kind, is_agent_qualified, is_subagent_key, main_key, parse_key
from ..listing import ListPosition, SessionPage, decode_cursor, encode_cursor
from ..notices import (
    CONTEXT_PREFIX,
    context_key_for,
    format_line,
    notice_renderer,
    parse_notice,
    target_from_context_key,
)
from ..repeats import RepeatedFailures
from ..settings import Settings
from ..store import default_sqlite_path, open_store
from ..store.base import Store
from ..store.records import (
    ChangesPage,
    EventInput,
    EventRecord,
    LogBounds,
    MessageRow,
    PruneResult,
    QueueEntry,
    RecordOutcome,
    SessionRow,
    WakeRequest,
)
from ..types import QueueEntry as QueueEntryJSON
from . import data_settings, evicted, leases, lifecycle
from .drops import DropCounter
from .observe import NULL, Observer, SpanStore, TimedStore, Tracer
from .wakes import Subscription, Wake, WakeCallback, WakeHub

if TYPE_CHECKING:  # imported on first use at run time (see Gateway.upstream)
    from ..upstream.service import UpstreamService

T = TypeVar("T")

log = logging.getLogger("sessionwatch.engine")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

PROVENANCES = ("external_user", "inter_session", "internal_system")
SETTINGS_REFRESH_MS = 10_000  # a running process picks up `sessionwatch settings set` within this
ROLES = ("user", "assistant", "system")
MAX_CONTEXT_KEY = 2048


class Periodic(Protocol):
    """Timed work driven by ``run_due`` (the upstream monitor registers one)."""

    def due_at(self) -> int | None: ...

    def run_due(self, now: int) -> None: ...


def default_store_url() -> str:
    """``$SESSIONWATCH_STORE``, else a per-user state file."""
    env = os.environ.get("SESSIONWATCH_STORE")
    if env:
        return env
    return "sqlite:///" + str(default_sqlite_path())


def _actor(value: object) -> tuple[str, str | None]:
    if value is None:
        return "system", None
    if not isinstance(value, Mapping):
        raise InvalidArgument("actor must be an object {type, id}")
    kind = validation.one_of(value.get("type"), "actor.type", ("human", "agent", "system"))
    actor_id = value.get("id")
    if actor_id is not None:
        actor_id = validation.name(actor_id, "actor.id") if kind != "agent" else parse_key(actor_id, "actor.id").raw
    return kind, actor_id


def entry_json(e: QueueEntry) -> QueueEntryJSON:
    return {"id": e.id, "text": e.text, "ts": e.ts, "contextKey": e.context_key, "line": format_line(e.ts, e.text)}


class Gateway:
    """sessionwatch's engine. Open with :meth:`open`; close when done (or use ``with``)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        sweep: bool = True,
        timers: bool | None = None,
        read_only: bool = False,
        prune_on_open: bool = True,
    ) -> None:
        """``read_only``: opening and reading never write (no sweep, no prune, no timers), for read-only
        commands. ``prune_on_open=False``: no forced prune after the sweep (clients that share a store
        with a gateway). The data settings come from the store (see engine/data_settings.py)."""
        self.store = store
        self._injected_clock = clock is not None
        self.clock: Clock = clock or system_clock
        self.read_only = read_only
        try:
            self.settings = data_settings.resolve(store, settings or Settings(), self.clock(), read_only=read_only)
        except BaseException:
            store.close()
            raise
        self._settings_checked_at = self.clock()
        self.drops = DropCounter()
        self.observer: Observer = NULL  # metrics hooks (set_observer); the default does nothing
        self.tracer: Tracer | None = None  # spans around tool calls and store operations (enable_tracing)
        self.sweep_error: str | None = None
        self.sweep_ran = False
        self._closed = False
        self._prune_lock = threading.Lock()
        self._next_prune_at = 0
        self._prune_requested = False  # a recording found the hourly prune due (see _prune_soon)
        self._timer_thread: threading.Thread | None = None
        self._reply_cv = threading.Condition()
        self._periodic: list[Periodic] = []
        self._timer_event = threading.Event()
        self.wakes = WakeHub(
            self.clock, self.settings.wake_coalesce_ms, self._still_pending, on_schedule=self._timer_event.set
        )
        self._render = notice_renderer(self.settings.public_url)
        self.machine = lifecycle.this_machine()  # reported pids of this machine are checked before "lost"
        self._upstream: UpstreamService | None = None
        self.swept = 0
        self.swept_at: int | None = None  # when this process's restart sweep last ran (the dashboard shows it)
        if sweep and not read_only:
            self._restart_sweep()
            if prune_on_open:  # events only: the stale-cursor slices are the hourly prune's
                self._prune(force=True, expire_cursors=False)
        if os.environ.get("SESSIONWATCH_OTEL", "").lower() in ("1", "true", "yes", "on"):
            from ..tracing import otel_tracer

            tracer = otel_tracer()  # None (logged) when OpenTelemetry is not installed
            if tracer is not None:
                self.enable_tracing(tracer)
        self.store.listen_wakes(lambda w: self.wakes.request([w]))
        self.lost_timer: lifecycle.LostTimer | None = None
        if not read_only:
            self.lost_timer = lifecycle.LostTimer(self)
            self._periodic.append(self.lost_timer)
        if not read_only and (timers if timers is not None else not self._injected_clock):
            self._timer_thread = threading.Thread(target=self._timer_loop, name="sessionwatch-timers", daemon=True)
            self._timer_thread.start()

    @classmethod
    def open(
        cls,
        url: str | None = None,
        clock: Clock | None = None,
        *,
        settings: Settings | None = None,
        timers: bool | None = None,
        read_only: bool = False,
        prune_on_open: bool = True,
    ) -> Gateway:
        """Open a store by URL and run the restart sweep; returns once the sweep has finished.

        ``read_only=True`` skips every write (sweep, prune, timers); see ``__init__``."""
        return cls(
            open_store(url or default_store_url()),
            clock=clock,
            settings=settings,
            timers=timers,
            read_only=read_only,
            prune_on_open=prune_on_open,
        )

    def set_observer(self, observer: Observer) -> None:
        """Report recordings, deliveries, wakes, monitor ticks (and, if it asks, store timings) to ``observer``."""
        self.observer = observer
        self.wakes.observer = observer
        if observer.times_store:
            inner = self.store.inner if isinstance(self.store, TimedStore) else self.store
            self.store = TimedStore(inner, observer)  # type: ignore[assignment]

    def enable_tracing(self, tracer: Tracer) -> None:
        """Run tool calls and store operations inside spans of ``tracer`` (see sessionwatch/tracing.py)."""
        self.tracer = tracer
        self.store = SpanStore(self.store, tracer)  # type: ignore[assignment]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._upstream is not None:
            self._upstream.stop()
        self._timer_event.set()
        if self._timer_thread is not None:
            self._timer_thread.join(timeout=5)
        with self._prune_lock:  # a background prune in flight finishes its batch first
            self.store.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- timers ----------------------------------------------------------------------------------
    def add_periodic(self, task: Periodic) -> None:
        self._periodic.append(task)
        self._timer_event.set()

    def run_due(self, now: int | None = None) -> None:
        """Run trailing wakes and periodic work that is due (tests with an injected clock call this)."""
        now = self.clock() if now is None else now
        self.wakes.run_due(now)
        self._run_requested_prune(now)
        for task in list(self._periodic):
            due = task.due_at()
            if due is not None and due <= now:
                try:
                    task.run_due(now)
                except Exception:  # noqa: BLE001 - one task failing must not stop the others (logged)
                    failure_log.exception("periodic task failed")
        polled: list[WakeRequest] = self._safe(lambda: self.store.poll_wakes(self.wakes.watchers()), [])
        for req in polled:
            self.wakes.request([req])
        if now - self._settings_checked_at >= SETTINGS_REFRESH_MS:
            self._refresh_data_settings(now)

    def _refresh_data_settings(self, now: int) -> None:
        """Adopt values changed by `sessionwatch settings set` while this process runs."""
        self._settings_checked_at = now
        stored: dict[str, int] = self._safe(self.store.data_settings, {})
        # field name -> value, for dataclasses.replace (every data setting is an int field)
        changes: dict[str, Any] = {n: v for n, v in stored.items() if getattr(self.settings, n, v) != v}
        if not changes:
            return
        log.warning("the store's data settings changed: %s", changes)
        self.settings = dataclasses.replace(self.settings, **changes)
        self.wakes._window = self.settings.wake_coalesce_ms  # the hub reads it per request

    def _timer_loop(self) -> None:
        while not self._closed:
            dues = [d for d in [self.wakes.next_due(), *(t.due_at() for t in self._periodic)] if d is not None]
            now = self.clock()
            wait = 1.0 if not dues else max(0.0, min(1.0, (min(dues) - now) / 1000))
            self._timer_event.wait(wait)
            self._timer_event.clear()
            if self._closed:
                return
            try:
                self.run_due()
            except Exception:  # noqa: BLE001 - the timer thread must keep running (logged)
                failure_log.exception("timer tick failed")

    # -- helpers ---------------------------------------------------------------------------------
    def _host_read(self, fn: Callable[[], T], what: str) -> T:
        """A host read that failed is an error (``unavailable``), never an empty success."""
        try:
            return fn()
        except SessionwatchError:
            raise
        except Exception as exc:
            failure_log.warning("%s failed: %s: %s", what, exc.__class__.__name__, exc, per=what)
            raise StoreUnavailable(f"{what} failed: {exc.__class__.__name__}: {exc}") from exc

    @property
    def dropped_recordings(self) -> dict[str, Any]:
        """Recordings the store refused since this process started: ``{total, byCause}``."""
        return self.drops.to_json()

    def dropped_recordings_of(self, agents: frozenset[str] | None) -> dict[str, Any]:
        """``dropped_recordings`` of ``agents``' sessions only (None: of every session)."""
        return self.drops.to_json(agents)

    def _safe(self, fn: Callable[[], T], default: T) -> T:
        """Internal reads (wake bookkeeping) degrade to a default; host reads use ``_host_read``."""
        try:
            return fn()
        except SessionwatchError:
            raise
        except Exception:  # noqa: BLE001 - internal bookkeeping reads degrade (logged)
            failure_log.exception("store read failed; degrading to an empty result")
            return default

    def _still_pending(self, watcher: str) -> bool:
        return self._safe(lambda: self.store.has_pending_notice(watcher, self.settings.queue_cap), False)

    def resolve(
        self,
        key: object,
        agent_id: object = None,
        *,
        caller_agent: str | None = None,
        what: str = "sessionKey",
        stored: bool = False,
    ) -> tuple[str, str]:
        """Validate a key and name its agent: the key's own, or for bare ``global`` the given/caller agent.
        ``stored``: only an existing session is looked up (see ``keys.parse_key``)."""
        k = parse_key(key, what, stored=stored)
        if agent_id is not None:
            agent_id = check_agent_id(agent_id)
        if k.agent_id is not None:
            if agent_id is not None and agent_id != k.agent_id:
                raise InvalidArgument(f"agentId {agent_id!r} does not match the agent of {k.raw!r}")
            return k.raw, k.agent_id
        agent = agent_id or caller_agent
        if agent is None:
            raise InvalidArgument("a bare 'global' key needs agentId to name its agent")
        return k.raw, agent

    def session(
        self, key: object, agent_id: object = None, *, caller_agent: str | None = None, what: str = "sessionKey"
    ) -> SessionRow:
        # an existing session only: one stored before a key's characters were restricted is still found
        skey, agent = self.resolve(key, agent_id, caller_agent=caller_agent, what=what, stored=True)
        row = self._host_read(lambda: self.store.get_session(skey, agent), "reading the session")
        if row is None:
            raise NotFound(f"session {skey!r} (agent {agent}) does not exist")
        return row

    def session_with_version(self, session_key: str, agent_id: str) -> tuple[SessionRow, int]:
        """A resolved session and its stateVersion in one store read (session_status)."""
        found = self._host_read(
            lambda: self.store.get_session_with_version(session_key, agent_id),
            "reading the session and its stateVersion",
        )
        if found is None:
            raise NotFound(f"session {session_key!r} (agent {agent_id}) does not exist")
        return found

    def session_status_row(self, session_key: str, agent_id: str) -> tuple[SessionRow, int, dict[str, Any] | None]:
        """A resolved session, its stateVersion and its lifecycle (None: never reported) in one store read."""
        found = self._host_read(
            lambda: self.store.get_session_status(session_key, agent_id),
            "reading the session, its stateVersion and its lifecycle",
        )
        if found is None:
            raise NotFound(f"session {session_key!r} (agent {agent_id}) does not exist")
        return found

    def _clamp(self, occurred_at: object, now: int) -> int:
        if isinstance(occurred_at, bool) or not isinstance(occurred_at, (int, float)) or not math.isfinite(occurred_at):
            return now
        return int(min(max(occurred_at, now - self.settings.occurred_at_window_ms), now))

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

    def _prune_soon(self, now: int) -> None:
        """The hourly prune is due: run it off the recording path, which never waits for it.

        The timer thread runs it (``run_due``); a process without one starts a one-off thread; with an
        injected clock nothing runs in the background, so it waits for the next ``run_due``."""
        self._prune_requested = True
        if self._timer_thread is not None:
            self._timer_event.set()
        elif not self._injected_clock and not self._prune_lock.locked():
            threading.Thread(
                target=self._run_requested_prune, args=(now,), name="sessionwatch-prune", daemon=True
            ).start()

    def _run_requested_prune(self, now: int) -> None:
        if self._prune_requested and not self._closed:
            self._prune_requested = False
            self._maybe_prune(now)

    def _maybe_prune(self, now: int) -> None:
        if self.read_only:
            return
        if not self._prune_lock.acquire(blocking=False):
            return  # join the in-flight prune instead of starting another
        try:
            self._next_prune_at = now + self.settings.prune_interval_ms
            self.store.prune(
                now,
                self.settings.retention_ms,
                self.settings.max_events,
                force=False,
                interval_ms=self.settings.prune_interval_ms,
                queue_cap=self.settings.queue_cap,
            )
        except Exception:  # noqa: BLE001 - a prune is retried at the next interval (logged)
            failure_log.exception("throttled prune failed")
        finally:
            self._prune_lock.release()

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
        # Actor classification (reference §2.5): only a person's turn can become human_direct_message.
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

    # -- transcripts -----------------------------------------------------------------------------
    def append_message(
        self, key: object, role: object, text: object, *, agent_id: object = None, imported: bool = False
    ) -> dict[str, Any]:
        """Append to a session's transcript (an assistant reply answers a waiting ``sessions_send``)."""
        row = self.session(key, agent_id)
        role = validation.one_of(role, "role", ROLES)
        body = validation.text(text, "text", allow_empty=True)
        msg = self.store.append_message(
            MessageRow(0, row.session_key, row.agent_id, role, body, self.clock(), imported=bool(imported))
        )
        self._notify_messages()
        return msg.to_json()

    def _notify_messages(self) -> None:
        with self._reply_cv:
            self._reply_cv.notify_all()

    def wait_for_reply(self, key: str, agent: str, after_id: int, timeout_s: float) -> MessageRow | None:
        """The first assistant message after ``after_id`` within ``timeout_s`` of real time."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            replies = self.store.messages(key, agent, 200, after_id=after_id, role="assistant")
            if replies:
                return replies[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return None
            with self._reply_cv:
                self._reply_cv.wait(min(remaining, 0.25))

    def own_user_texts(self, key: str, agent: str) -> list[str]:
        return self._safe(lambda: self.store.own_user_texts(key, agent, self.settings.own_recent_texts), [])

    # -- watches, notices, queue -----------------------------------------------------------------
    def _register(self, watcher: str, target: str, target_agent: str, provenance: str) -> bool:
        try:
            return self.store.register_watch(watcher, target, target_agent, provenance, self.clock())
        except Exception:  # noqa: BLE001 - a watch registration is best-effort (logged)
            failure_log.exception("watch registration %s -> %s failed", watcher, target)
            return False

    def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool:
        """Explicit watch (what ``sessions_send watch: true`` does), seeded at the target's head."""
        w = parse_key(watcher, "watcher")
        t, agent = self.resolve(target, agent_id, what="target")
        return self._register(w.raw, t, agent, "explicit")

    def unwatch(self, watcher: object, target: object) -> bool:
        return self._unwatch(parse_key(watcher, "watcher").raw, parse_key(target, "target").raw)

    def _unwatch(self, watcher: str, target: str) -> bool:
        """Unwatch validated keys (the tool's target exists, so it may be a key stored before; parse_key)."""
        return self.store.unwatch(watcher, target, context_key_for(target), self.clock(), self.settings.queue_cap)

    def cursors(self, *, watcher: object = None, target: object = None) -> list[dict[str, Any]]:
        w = parse_key(watcher, "watcher").raw if watcher is not None else None
        t = parse_key(target, "target").raw if target is not None else None
        return [c.to_json() for c in self._host_read(lambda: self.store.cursors(w, t), "reading cursors")]

    def acknowledge(self, watcher: object, targets: list[str]) -> int:
        """Acknowledge pending notices of ``watcher`` for ``targets`` (what a drain does for its entries)."""
        w = parse_key(watcher, "watcher").raw
        try:
            wakes = self.store.acknowledge(w, targets, self._render, self.clock(), self.settings.queue_cap)
        except Exception:  # noqa: BLE001 - an acknowledge is retried by the next read (logged)
            failure_log.exception("acknowledge for %s failed", w)
            return 0
        self.observer.notices_acknowledged(len(targets))
        self.observer.notices_reopened(len(wakes))
        self.wakes.request(wakes)
        return len(targets)

    def enqueue_system_event(
        self, key: object, text: object, *, context_key: object = None, agent_id: object = None
    ) -> dict[str, Any]:
        skey, _ = self.resolve(key, agent_id)
        body = validation.text(text, "text")
        ctx = None
        if context_key is not None:
            ctx = validation.text(context_key, "contextKey", max_bytes=MAX_CONTEXT_KEY).lower()
        entry = self.store.enqueue(
            skey, body, ctx, self.clock(), self.settings.queue_cap, notice=parse_notice(body, ctx, self._render)
        )
        return {"queued": entry is not None, "entry": entry_json(entry) if entry else None}

    def peek_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntryJSON]:
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        return [
            entry_json(e)
            for e in self._host_read(
                lambda: self.store.peek(skey, self._render, self.settings.queue_cap), "reading the system-event queue"
            )
        ]

    def drain_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntryJSON]:
        """A watcher's turn consumes its queue: returns the entries and acknowledges session-state ones."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        try:
            entries, wakes = self.store.drain(
                skey, target_from_context_key, self._render, self.clock(), self.settings.queue_cap
            )
        except Exception as exc:  # the notices stay queued: an error, never an empty success
            failure_log.exception("drain for %s failed", skey)
            raise StoreUnavailable(f"draining the queue of {skey!r} failed: {exc.__class__.__name__}: {exc}") from exc
        self._delivered(entries, wakes)
        self.wakes.request(wakes)
        self._requeue_evicted(skey, len(entries))
        return [entry_json(e) for e in entries]

    def ack_system_events(self, key: object, ids: object, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries a client received (ids from a peek): removes exactly those still queued and
        acknowledges the session-state ones as a drain does. Returns ``{acknowledged: n}``; ids that are
        gone already (acknowledged, replaced, evicted) are skipped, so a repeated ack changes nothing."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        wanted = validation.id_list(ids, "ids")
        if not wanted:
            return {"acknowledged": 0}
        entries, wakes = self.store.acknowledge_entries(
            skey, wanted, target_from_context_key, self._render, self.clock(), self.settings.queue_cap
        )
        self._delivered(entries, wakes)
        self.wakes.request(wakes)
        self._requeue_evicted(skey, len(entries))
        return {"acknowledged": len(entries)}

    def deliver_system_events(
        self, key: object, *, agent_id: object = None, lease_ms: int | None = None
    ) -> leases.Delivery:
        """Take the queue's free entries for one answer that may not reach its client (an HTTP drain):
        they stay queued, leased to this delivery for ``lease_ms`` (``Settings.drain_lease_ms``), and no
        other drain hands them out meanwhile. End it with ``settle()`` once the answer is complete, or
        ``release()``; a delivery never ended frees them when the lease runs out (docs/http.md)."""
        skey, _ = self.resolve(key, agent_id, stored=True)  # its own queue: creates no session
        ms = max(1, int(lease_ms if lease_ms is not None else self.settings.drain_lease_ms))
        try:
            return leases.lease(self, skey, ms, entry_json)
        except Exception as exc:  # the notices stay queued: an error, never an empty success
            failure_log.exception("leasing the queue of %s failed", skey)
            raise StoreUnavailable(f"reading the queue of {skey!r} failed: {exc.__class__.__name__}: {exc}") from exc

    def withheld_notices(self, key: object, *, agent_id: object = None, shown: Sized | None = None) -> int:
        """How many more watched sessions changed than the full queue of ``key`` holds notices for (the cap
        evicted theirs; they are queued again as the queue is taken, engine/evicted.py). 0 unless the
        queue is full; given ``shown`` (the entries just peeked) shorter than the cap, nothing is read."""
        skey, _ = self.resolve(key, agent_id, stored=True)
        return self._host_read(
            lambda: evicted.withheld_count(self.store, skey, shown, self._render, self.settings.queue_cap),
            "reading the watched sessions",
        )

    def _requeue_evicted(self, watcher: str, taken: int) -> None:
        """A full queue was taken: the stale notices its cap evicted are queued again (engine/evicted.py)."""
        try:
            evicted.requeue_evicted(self.store, watcher, taken, self._render, self.clock(), self.settings.queue_cap)
        except Exception:  # noqa: BLE001 - best-effort: the restart sweep queues them too (logged)
            failure_log.exception("queueing the evicted notices of %s again failed", watcher)

    def _delivered(self, entries: list[QueueEntry], wakes: list[Any]) -> None:
        """Metrics: entries a client took off the queue, the stale notices among them, the reopens."""
        obs = self.observer
        if obs is NULL:
            return
        obs.notices_delivered(len(entries))
        obs.notices_acknowledged(sum(1 for e in entries if target_from_context_key(e.context_key) is not None))
        obs.notices_reopened(len(wakes))

    def reconcile(self, watcher: str, target: str, after: int, last: int) -> None:
        """``watcher`` read ``target``'s changes (after, last]: move its cursor and withdraw what the read
        covered (beyond v1; ``Settings.reconcile_acknowledges``). Best-effort: the read stands anyway."""
        if not self.settings.reconcile_acknowledges or not is_agent_qualified(watcher) or watcher == target:
            return
        try:
            wakes = self.store.reconcile(
                watcher, target, after, last, self._render, self.clock(), self.settings.queue_cap
            )
        except Exception:  # noqa: BLE001 - the read stands without its acknowledgement (logged)
            failure_log.exception("acknowledging %s's read of %s failed (the read stands)", watcher, target)
            return
        self.wakes.request(wakes)

    def subscribe_wakes(self, key: object, callback: WakeCallback) -> Subscription:
        """Call ``callback(Wake)`` for wakes of watcher ``key``; returns an unsubscribe handle.

        The callback runs on the thread that committed the notice (or the timer thread): keep it short
        and thread-safe.
        """
        return self.wakes.subscribe(parse_key(key, "sessionKey").raw, callback)

    def pending_wake(self, key: object) -> Wake | None:
        """The wake a subscriber that (re)connects gets at once when a waking notice is already queued for
        watcher ``key`` (a wake sent while it was away is not lost); None when nothing is pending.
        Blocking: one queue read."""
        watcher = parse_key(key, "sessionKey").raw
        if is_subagent_key(watcher):
            return None  # subagent watchers are never woken (their parent is)
        entries = self._host_read(
            lambda: self.store.peek(watcher, self._render, self.settings.queue_cap), "reading the system-event queue"
        )
        targets = [e.target or target_from_context_key(e.context_key) for e in entries if not e.queue_only]
        pending = [t for t in targets if t]
        if not pending:
            return None
        target = pending[-1]  # the newest
        return Wake(watcher, target, f"session-state:{target}", self.clock())

    # -- reconciliation --------------------------------------------------------------------------
    def state_version(self, key: object, agent_id: object = None) -> int:
        skey, agent = self.resolve(key, agent_id, stored=True)  # a read: finds a key stored before (parse_key)
        return int(self._host_read(lambda: self.store.state_version(skey, agent), "reading the stateVersion"))

    def changes_since(
        self, key: object, after: object, *, agent_id: object = None, limit: int | None = None
    ) -> ChangesPage:
        skey, agent = self.resolve(key, agent_id, stored=True)  # a read, as state_version
        after = validation.sequence(after, "changesSince")
        page = self.settings.changes_page_size
        lim = page if limit is None else max(1, min(page, int(limit)))
        return self._host_read(lambda: self.store.changes_since(skey, agent, after, lim), "reading changes")

    def events_after(
        self, after: object = 0, limit: object = 200, *, agents: frozenset[str] | None = None
    ) -> list[dict[str, Any]]:
        """The whole signal log after a sequence (every session), full payloads: for tailing.
        ``agents`` given: only those agents' events (a scoped token's view)."""
        a = validation.sequence(after, "after")
        n = validation.integer(limit, "limit", minimum=1, maximum=1000)
        if agents is None:
            return [e.to_json() for e in self._host_read(lambda: self.store.events_after(a, n), "reading the log")]
        return [
            e.to_json()
            for e in self._host_read(lambda: self.store.events_after(a, n, sorted(agents)), "reading the log")
        ]

    def log_bounds(self, *, agents: frozenset[str] | None = None, session: tuple[str, str] | None = None) -> LogBounds:
        """Earliest stored, last and pruned-through sequences of the log (all, ``agents``', or one session):
        what a resuming log-stream reader needs to tell a gap from a quiet log."""
        return self._host_read(
            lambda: self.store.log_bounds(None if agents is None else sorted(agents), session), "reading the log bounds"
        )

    # -- maintenance -----------------------------------------------------------------------------
    def sweep(self) -> int:
        """Re-materialize unacknowledged notices (restart sweep), then a forced prune."""
        count = self._restart_sweep()
        self.prune(force=True)
        return count

    def _restart_sweep(self) -> int:
        now = self.clock()
        try:
            count, wakes = self.store.sweep(self._render, now, self.settings.queue_cap)
        except Exception as exc:  # noqa: BLE001 - readiness reports it (and retries) until a sweep succeeds
            failure_log.exception("restart sweep failed")
            self.sweep_error = f"{exc.__class__.__name__}: {exc}"[:300]
            return 0
        self.sweep_error, self.sweep_ran = None, True
        self.swept, self.swept_at = count, now
        self.wakes.request(wakes)
        return count

    def readiness(self) -> dict[str, Any]:
        """Does the store accept a write, and has the restart sweep run? (blocking: one write probe)

        A sweep that failed at open is retried here once the store takes writes again."""
        out: dict[str, Any] = {"ready": False, "writable": False}
        try:
            self.store.probe_write(self.clock())
            out["writable"] = True
        except Exception as exc:  # noqa: BLE001 - any failure is an answer: not writable, and why
            out["message"] = f"the store does not accept writes: {exc.__class__.__name__}: {exc}"[:400]
        if out["writable"] and not self.sweep_ran and not self.read_only:
            self._restart_sweep()
        if out["writable"] and not self.sweep_ran:
            out["message"] = f"the restart sweep has not run: {self.sweep_error or 'not started'}"
        out["ready"] = out["writable"] and self.sweep_ran
        out["sweepRan"] = self.sweep_ran
        out["droppedRecordings"] = self.drops.to_json()
        return out

    def prune(self, *, force: bool = True) -> PruneResult:
        return self._prune(force=force)

    def _prune(self, *, force: bool, expire_cursors: bool = True) -> PruneResult:
        now = self.clock()
        with self._prune_lock:
            self._next_prune_at = now + self.settings.prune_interval_ms
            try:
                return self.store.prune(
                    now,
                    self.settings.retention_ms,
                    self.settings.max_events,
                    force=force,
                    interval_ms=self.settings.prune_interval_ms,
                    queue_cap=self.settings.queue_cap,
                    expire_cursors=expire_cursors,
                )
            except Exception:  # noqa: BLE001 - a failed prune is skipped, retried later (logged)
                failure_log.exception("prune failed")
                return PruneResult(skipped=True)

    # -- upstream monitoring (sessionwatch.upstream; imported on first use) -----------------------
    @property
    def upstream(self) -> UpstreamService:
        """The upstream service: catalogs, adoption links and the monitor."""
        if self._upstream is None:
            from ..upstream.service import UpstreamService

            self._upstream = UpstreamService(self)
        return self._upstream

    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        return self.upstream.list_threads(catalog_id)

    def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = "gateway:local",
    ) -> dict[str, Any]:
        return self.upstream.continue_thread(
            catalog_id, thread_id, session_key=session_key, agent_id=agent_id, host_id=host_id
        )

    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        return self.upstream.link(session_key, agent_id)

    def upstream_tick(self) -> dict[str, Any]:
        return self.upstream.tick()

    def nudge(self, session_key: object, agent_id: object = None, *, wait_ms: object = 0) -> dict[str, Any]:
        """Scan the session's adopted thread now (a hook saw a prompt submitted there), looking again for
        up to ``wait_ms`` (0–10000) while the host has not written the prompt's row yet."""
        row = self.session(session_key, agent_id)  # an unknown session is NotFound, as on every session route
        wait = validation.integer(wait_ms, "waitMs", minimum=0, maximum=10_000)
        return self.upstream.nudge(row.session_key, row.agent_id, retry_ms=wait)

    def upstream_results(self) -> dict[str, Any]:
        return self.upstream.last_results()

    def pair_node(self, node_id: str, url: str, token: str, *, verify: bool = True) -> dict[str, Any]:
        return self.upstream.pair_node(node_id, url, token, verify=verify)

    # -- tools -----------------------------------------------------------------------------------
    def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        caller: str,
        agent_id: str | None = None,
        scope: frozenset[str] | None = None,
    ) -> dict[str, Any]:
        """Run one tool as ``caller``. Errors come back as ``{"error": {"code", "message"}}``.

        ``scope`` (the agent ids a scoped token covers) limits the caller and every session the tool
        touches to those agents; None is unrestricted."""
        from .tools import run_tool

        if self.tracer is None:
            return run_tool(self, name, args if args is not None else {}, caller, agent_id, scope)
        with self.tracer.span(f"sessionwatch.tool.{name}", {"sessionwatch.tool": name, "sessionwatch.caller": caller}):
            return run_tool(self, name, args if args is not None else {}, caller, agent_id, scope)
