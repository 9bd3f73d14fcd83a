"""What every concern of the engine shares: the state the ``Gateway`` opens with and the helpers around it.

Each concern (sessions, producers, messaging, watching, system events, reconciliation, upkeep, upstream)
is a class over ``GatewayCore`` in its own module; ``engine/gateway.py`` composes them into ``Gateway``
and sets the state declared here (``Gateway.__init__``). A concern reads that state, never sets it up.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .. import validation
from ..clock import Clock
from ..errors import InvalidArgument, NotFound, SessionwatchError, StoreUnavailable
from ..keys import check_agent_id, parse_key
from ..notices import NoticeTemplate
from ..repeats import RepeatedFailures
from ..settings import Settings
from ..store.base import Store
from ..store.records import SessionRow
from ..store_urls import default_sqlite_path
from .drops import DropCounter
from .observe import Observer, Tracer
from .wakes import WakeHub

T = TypeVar("T")

log = logging.getLogger("sessionwatch.engine")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


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


class GatewayCore:
    """The engine's shared state (set by ``Gateway.__init__``) and the reads every concern uses."""

    store: Store
    clock: Clock
    settings: Settings
    read_only: bool
    drops: DropCounter
    observer: Observer  # metrics hooks (set_observer); the default does nothing
    tracer: Tracer | None  # spans around tool calls and store operations (enable_tracing)
    wakes: WakeHub
    machine: str  # reported pids of this machine are checked before "lost"
    _render: Callable[[str], NoticeTemplate]
    _injected_clock: bool
    _closed: bool
    # the timer thread (engine/upkeep.py runs it; the upstream monitor wakes it through the event)
    _timer_thread: threading.Thread | None
    _timer_event: threading.Event

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
