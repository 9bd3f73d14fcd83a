"""Lifecycle state (docs/lifecycle.md): what a host reports (working, waiting, idle, ended), the ``lost``
timer, and the typed events both record.

Every change of state is one content-free event in the signal log (``kinds.STATE_KINDS``). Only an
end, a loss and a return (``session_ended``, ``session_lost``, ``session_back``) are notify-eligible: the
spawn parent and the watchers get the usual one coalesced notice. Working, waiting and idle change with
every turn, so they are log-only. The state is stored first (one compare-and-set transaction, so of two
reports racing for one change exactly one records it); its events are then recorded like every other
recording, best-effort.
"""

from __future__ import annotations

import math
import os
import socket
from typing import TYPE_CHECKING, Any

from .. import kinds, validation
from ..errors import InvalidArgument, SessionwatchError, StoreUnavailable
from ..store.records import EventInput, EventRecord, LifecycleRow, SessionRow

if TYPE_CHECKING:
    from .producers import Producers

MAX_PID = 2**31 - 1
LOST_PAGE = 1000  # sessions the lost timer looks at per tick (oldest seen first)
MIN_TICK_MS, MAX_TICK_MS = 100, 30_000


def this_machine() -> str:
    """The name reported pids are compared with: ``$SESSIONWATCH_MACHINE``, else the host name."""
    return os.environ.get("SESSIONWATCH_MACHINE") or socket.gethostname()


def process_alive(pid: int) -> bool | None:
    """Whether a process with this pid runs on this machine: None when that cannot be told here. A
    zombie (exited, not yet reaped by its parent) is gone."""
    if os.name != "posix":
        return None  # os.kill(pid, 0) would not be a probe there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False  # exited between the two looks
    except OSError:
        return True  # no /proc here: the signal probe said it exists
    # the state is the field after the command name, which is in parentheses and may hold spaces
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def report(
    gw: Producers,
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
    """A host says what ``key`` is doing. Validates everything before writing; an unknown session is
    NotFound. A report of the state the session is in changes nothing but its last-seen time (a
    heartbeat); one older than the state's start (``at`` before ``since``) is ignored; a report for a
    lost session records ``session_back`` first."""
    row = gw.session(key, agent_id)
    st = validation.one_of(state, "state", kinds.REPORTED_STATES)
    proc = None if pid is None else validation.integer(pid, "pid", minimum=1, maximum=MAX_PID)
    hostname = validation.optional_name(host, "host")
    where = validation.optional_name(machine, "machine")
    end = None
    if outcome is not None:
        if st != "ended":
            raise InvalidArgument(f"outcome is for state 'ended' only, not {st!r}")
        end = validation.one_of(outcome, "outcome", kinds.END_OUTCOMES)
    claimed = None if at is None else validation.number(at, "at", minimum=-math.inf)
    now = gw.clock()
    since = now if claimed is None else gw._clamp(claimed, now)
    if proc is not None and where is None:
        where = gw.machine  # a pid without a machine is one of the machine this engine runs on
    incoming = LifecycleRow(row.session_key, row.agent_id, st, since, now, proc, where, hostname, end)
    try:
        before, verdict = gw.store.report_lifecycle(incoming)
    except SessionwatchError:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"storing the lifecycle of {row.session_key!r} failed: {exc}") from exc
    events: list[EventRecord] = []
    if verdict in ("new", "changed"):
        if before is not None and before.state == "lost":
            events += _record(gw, row, kinds.SESSION_BACK, kinds.SESSION_BACK_SUMMARY, since)
        events += _record(
            gw,
            row,
            kinds.STATE_KINDS[st],
            kinds.lifecycle_summary(st, end),
            since,
            payload={"outcome": end} if end is not None else None,
        )
    current = incoming if verdict in ("new", "changed") else before
    assert current is not None
    return {
        "sessionKey": row.session_key,
        "agentId": row.agent_id,
        "lifecycle": current.to_json(),
        "changed": verdict in ("new", "changed"),
        "stale": verdict == "stale",
        "events": [e.to_json() for e in events],
    }


def host_gone(
    gw: Producers, key: object, *, agent_id: object = None, pid: object = None, machine: object = None
) -> dict[str, Any]:
    """The address a session's host process bound is gone (its push found the inbox socket or the
    daemon gone): that process has ended. A session working or waiting whose reported process is that
    one is lost now, without waiting out the silence (the limit tells a quiet host from a dead one, and
    this one is known dead); anything else (another process, a state that cannot be lost, a process that
    still runs here: the address alone went away) changes nothing. Returns ``{sessionKey, agentId,
    lifecycle, lost, events}``."""
    row = gw.session(key, agent_id)
    proc = validation.integer(pid, "pid", minimum=1, maximum=MAX_PID)
    where = validation.optional_name(machine, "machine") or gw.machine
    current = gw.store.get_lifecycle(row.session_key, row.agent_id)
    events: list[EventRecord] = []
    if (
        current is not None
        and current.state in kinds.LIVE_STATES
        and current.pid == proc
        and (current.machine or gw.machine) == where
        and not (where == gw.machine and process_alive(proc))
    ):
        now = gw.clock()
        if gw.store.mark_lost(row.session_key, row.agent_id, now, now) is not None:
            events = _record(gw, row, kinds.SESSION_LOST, kinds.lifecycle_summary("lost"), now)
            current = gw.store.get_lifecycle(row.session_key, row.agent_id)
    return {
        "sessionKey": row.session_key,
        "agentId": row.agent_id,
        "lifecycle": current.to_json() if current is not None else None,
        "lost": bool(events),
        "events": [e.to_json() for e in events],
    }


def _record(
    gw: Producers, row: SessionRow, kind: str, summary: str, at: int, payload: dict[str, Any] | None = None
) -> list[EventRecord]:
    outcome = gw.record(
        EventInput(
            row.session_key,
            row.agent_id,
            kind,
            "system",
            summary,
            at,
            session_id=row.session_id,
            payload=payload,
            watchers=(row.spawned_by,) if row.spawned_by else (),
        )
    )
    return [outcome.event] if outcome is not None and outcome.event is not None else []


class LostTimer:
    """The engine's timer for ``lost`` (registered with ``Gateway.add_periodic``, run by ``run_due``):
    a session working or waiting that reported nothing for ``Settings.lost_after_ms`` becomes lost,
    unless the process it reported runs on this machine and is still alive. Several processes may run
    it on one store: marking is a compare-and-set, so each loss is recorded once."""

    def __init__(self, gw: Producers) -> None:
        self.gw = gw
        self._next = gw.clock() + self.interval()

    def interval(self) -> int:
        # a quarter of the limit: a loss is seen at most 25% late, without polling a long limit often
        return max(MIN_TICK_MS, min(MAX_TICK_MS, self.gw.settings.lost_after_ms // 4))

    def due_at(self) -> int | None:
        return self._next

    def run_due(self, now: int) -> None:
        self._next = now + self.interval()
        self.check(now)

    def check(self, now: int) -> list[EventRecord]:
        """One look: mark what is lost now, record it; returns the events recorded."""
        gw = self.gw
        cutoff = now - gw.settings.lost_after_ms
        recorded: list[EventRecord] = []
        for cand in gw.store.lost_candidates(cutoff, LOST_PAGE):
            if cand.pid is not None and cand.machine == gw.machine and process_alive(cand.pid):
                continue  # its process still runs here: quiet, not lost
            if gw.store.mark_lost(cand.session_key, cand.agent_id, cutoff, now) is None:
                continue  # reported meanwhile, or another process marked it first
            session = gw.store.get_session(cand.session_key, cand.agent_id)
            if session is None:
                continue
            recorded += _record(gw, session, kinds.SESSION_LOST, kinds.lifecycle_summary("lost"), now)
        return recorded
