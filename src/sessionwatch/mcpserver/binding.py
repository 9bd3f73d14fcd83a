"""The transport-free half of the MCP face: run a tool as the bound session and let notices ride along.

An MCP client has no reliable server push (2026-era push streams are not a replay log), so the bound
session's pending system events are attached to every tool result. Attaching is not acknowledging: a
call the client cancels (Esc in Claude Code) or whose answer is lost must leave its notices queued. So
a call peeks (entries carry stable ids) and the ids are acknowledged only once its result went out:

- stdio and in-memory: when the transport reports the answer written (``mcpserver.delivery``);
- streamable HTTP: when the answer was written to the end while its client was connected *and* the
  same MCP session then makes its next tool call (or ends itself with DELETE): a client that calls
  again read its earlier answer. An answer on a connection that dropped goes back at once; one written
  to a session that never calls again stays queued and rides along with the next call of any session.
  A 2026-07-28 request has no session: its answer counts once written to the end, connected;
- a transport that reports nothing: at the bound session's next call.

Each notice rides along at least once, and after a lost answer at most once more.

A server a host started without telling it its session (Codex names the session only in each tool call)
is bound late: ``late`` (the host room's push channel) names the session from a call's ``_meta``, the
first call that does binds the server for good; until then the session its hooks registered for it (a
claim, see ``hosts/codex/push.py``) stands in, and with neither a call is refused.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import NotFound, SessionwatchError
from ..notices import withheld_line
from ..repeats import RepeatedFailures

log = logging.getLogger("sessionwatch.mcp")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


class LateSession(Protocol):
    """How a server learns its session late (a host room's push channel, ``hosts/push.Channel``)."""

    def session_of_call(self, meta: Any, agent: str | None) -> str | None: ...

    def unclaimed_session(self, agent: str | None) -> str | None: ...

    def release(self, session_key: str) -> None: ...


class ToolBackend(Protocol):
    """What the MCP face needs; both ``Gateway`` and ``GatewayClient`` provide it."""

    def call_tool(
        self, name: str, args: dict[str, Any] | None = None, *, caller: str, agent_id: str | None = None
    ) -> dict[str, Any]: ...

    def get_session(self, key: Any, agent_id: Any = None) -> dict[str, Any]: ...

    def put_session(self, key: Any, **kwargs: Any) -> dict[str, Any]: ...

    def peek_system_events(self, key: Any, *, agent_id: Any = None) -> list[dict[str, Any]]: ...

    def ack_system_events(self, key: Any, ids: Any, *, agent_id: Any = None) -> dict[str, Any]: ...


@dataclass
class ToolOutcome:
    """One tool result as the MCP face publishes it."""

    payload: dict[str, Any]
    system_events: list[dict[str, Any]] = field(default_factory=list)
    ticket: int = 0  # the call's delivery ticket (SessionBinding.open_call)
    withheld: int = 0  # watched sessions changed whose notices the full queue's cap held back

    @property
    def is_error(self) -> bool:
        return isinstance(self.payload.get("error"), dict)

    def text(self) -> str:
        """The System lines first (what a harness prepends to a turn), then the tool's own text."""
        body = json.dumps(self.payload, ensure_ascii=False) if self.is_error else str(self.payload.get("text", ""))
        lines = [str(e.get("line", "")) for e in self.system_events]
        if lines and self.withheld:  # a line, not an entry: it has no id and nothing acknowledges it
            lines.append(withheld_line(self.withheld))
        return "\n".join(lines) + "\n\n" + body if lines else body

    def structured(self) -> dict[str, Any]:
        """The result as data, without its ``text``: the text is the content block already, and the hosts
        hand the model structuredContent too, so a ``text`` field there would be read twice."""
        data = {k: v for k, v in self.payload.items() if k != "text"}
        out = {**data, "systemEvents": list(self.system_events)}
        if self.system_events and self.withheld:
            out["systemEventsWithheld"] = self.withheld
        return out


class Exchange:
    """One HTTP request to the MCP endpoint, as the delivery bookkeeping sees it (``mcpserver.delivery``)."""

    __slots__ = ("closed", "ids", "sent", "session")

    def __init__(self, session: str | None) -> None:
        self.session = session  # the request's Mcp-Session-Id (None: a 2026-07-28 single exchange)
        self.ids: list[int] = []  # entries the answered call carried
        self.sent = False  # its answer was written to the end while the client was connected
        self.closed = False  # the HTTP request is over: a call answering later reaches no one


MAX_UNCONFIRMED_SESSIONS = 1000  # MCP sessions whose written answers wait for their next call


class SessionBinding:
    """Every call runs as ``session_key``; its pending notices ride along and are acknowledged once the
    result was delivered (see the module docstring). Thread-safe: calls run on worker threads."""

    def __init__(
        self,
        backend: ToolBackend,
        session_key: str | None,
        agent_id: str | None = None,
        *,
        late: LateSession | None = None,
        late_agent: str | None = None,
    ) -> None:
        if session_key is None and late is None:
            raise ValueError("a binding needs a session key, or a way to learn it late")
        self.backend = backend
        self.session_key: str | None = session_key
        self.agent_id = agent_id
        self.late = late
        self.late_agent = late_agent  # the agent of a late session's key (--agent), else the server's folder
        self._claimed: str | None = None  # the session the server's hooks registered for it (not final)
        # True once a transport reports written answers (written()); otherwise an answer counts as
        # delivered when the session's next call starts.
        self.reports_writes = False
        self._lock = threading.Lock()  # the bookkeeping below
        self._ack_lock = threading.Lock()  # one acknowledgment at a time, done before the next peek
        self._tickets = itertools.count(1)
        self._in_flight: dict[int, list[int]] = {}  # ticket -> ids attached to a call still running
        self._answered: dict[str, list[int]] = {}  # request id -> ids of an answer not yet written
        self._due: list[int] = []  # ids whose answer went out: to acknowledge
        # MCP session id -> ids of answers written to it, confirmed by that session's next call.
        self._unconfirmed: OrderedDict[str, list[int]] = OrderedDict()
        # streamable HTTP: ids of answers on their way (the request has not ended), by exchange: a client
        # that read the answer may call again before the server finished the request, and must not be
        # handed the same notices once more
        self._in_transit: dict[int, list[int]] = {}
        self._settling: list[int] = []  # ids being acknowledged right now

    def ensure_session(self) -> dict[str, Any]:
        """Create the bound session when missing; an existing one is left exactly as it is (a late
        binding: nothing to do before it is bound)."""
        if self.session_key is None:
            return {}
        try:
            return self.backend.get_session(self.session_key, self.agent_id)
        except NotFound:
            log.info("creating bound session %s", self.session_key)
            return self.backend.put_session(self.session_key, agent_id=self.agent_id)

    # -- a late binding --------------------------------------------------------------------------
    def resolve(self, meta: Any = None) -> str | None:
        """The session this call runs as: the bound one; else the one ``meta`` names (which binds the server
        for good); else the one the server's hooks registered for it; else None."""
        if self.session_key is not None or self.late is None:
            return self.session_key
        named = self.late.session_of_call(meta, self.late_agent) if meta else None
        if named is None:
            return self.claimed()
        with self._lock:
            if self.session_key is None:
                self.session_key = named
                log.info("bound to %s (named by the host's call)", named)
            claimed, self._claimed = self._claimed, None
        if claimed is not None and claimed != self.session_key:
            self.late.release(claimed)
        try:
            self.ensure_session()
        except Exception:  # noqa: BLE001 - the call itself says what is wrong with the store
            failure_log.exception("creating bound session %s failed", self.session_key)
        return self.session_key

    def claimed(self) -> str | None:
        """The bound session, else the one the server's hooks registered for it (claimed on first look)."""
        if self.session_key is not None or self.late is None:
            return self.session_key
        if self._claimed is None:
            found = self.late.unclaimed_session(self.late_agent)
            with self._lock:
                if self._claimed is None:
                    self._claimed = found
        return self.session_key or self._claimed

    def for_call(self, named: object = None) -> SessionBinding:
        """The binding a call runs on: this one. A session a call names (``mcpserver.routing``) is not
        this server's to take: it is bound."""
        return self

    # -- delivery bookkeeping --------------------------------------------------------------------
    def open_call(self) -> int:
        return next(self._tickets)

    def answered(self, ticket: int, request_id: object, exchange: Exchange | None = None) -> None:
        """The call's result is being answered (not cancelled): its entries are delivered once written."""
        with self._lock:
            ids = self._in_flight.pop(ticket, [])
            if not ids:
                return
            if exchange is not None:  # streamable HTTP: see exchange_done
                if not exchange.closed:  # else the client went away while the call ran: all stays queued
                    exchange.ids.extend(ids)
                    self._in_transit[id(exchange)] = exchange.ids
            elif self.reports_writes:
                self._answered[str(request_id)] = ids
            else:
                self._due.extend(ids)

    def abandon(self, ticket: int) -> None:
        """The call was cancelled or failed: nothing it attached reached the client; all stays queued."""
        with self._lock:
            self._in_flight.pop(ticket, None)

    def written(self, request_id: object) -> bool:
        """The transport wrote the answer to ``request_id``. True when that made acknowledgments due."""
        with self._lock:
            ids = self._answered.pop(str(request_id), None)
            if ids:
                self._due.extend(ids)
            return bool(ids)

    def exchange_done(self, exchange: Exchange) -> bool:
        """An HTTP request ended. What its answer carried waits for the session's next call when it was
        written to the end (with no session: counts at once); otherwise it stays queued. True when
        acknowledgments became due."""
        with self._lock:
            exchange.closed = True
            self._in_transit.pop(id(exchange), None)
            if not exchange.sent or not exchange.ids:
                return False
            if exchange.session is None:
                self._due.extend(exchange.ids)
                return True
            self._unconfirmed.setdefault(exchange.session, []).extend(exchange.ids)
            self._unconfirmed.move_to_end(exchange.session)
            while len(self._unconfirmed) > MAX_UNCONFIRMED_SESSIONS:  # their notices simply come again
                self._unconfirmed.popitem(last=False)
            return False

    def confirm(self, session: str | None) -> None:
        """MCP session ``session`` is calling again (or ended itself): it read its earlier answers."""
        if session is None:
            return
        with self._lock:
            self._due.extend(self._unconfirmed.pop(session, []))

    def settle(self) -> None:
        """Acknowledge the entries of delivered answers. A failure keeps them due (tried again later)."""
        with self._ack_lock:
            with self._lock:
                ids, self._due = self._due, []
                self._settling = list(ids)  # still queued until the ack returns: no call may carry them
            if not ids:
                return
            try:
                self.backend.ack_system_events(self.session_key or self._claimed, ids, agent_id=self.agent_id)
            except Exception:  # noqa: BLE001 - the ids stay pending and are retried (logged)
                failure_log.exception("acknowledging delivered notices of %s failed; will retry", self.session_key)
                with self._lock:
                    self._due[:0] = ids
            finally:
                with self._lock:
                    self._settling = []

    def pending(self, ticket: int = 0) -> list[dict[str, Any]]:
        """The queue to attach, minus what a concurrent call carries or a delivered answer already had."""
        return self._attachment(ticket)[0]

    def _attachment(self, ticket: int) -> tuple[list[dict[str, Any]], int]:
        """``pending`` and, when the queue was full, how many watched sessions' notices its cap held back."""
        key = self.claimed()
        if key is None:
            return [], 0
        try:
            queued = list(self.backend.peek_system_events(key, agent_id=self.agent_id))
        except Exception:  # noqa: BLE001 - a failed read leaves the notices queued; the next call delivers them
            failure_log.exception("reading the system events of %s failed", self.session_key)
            return [], 0
        with self._lock:
            taken = {i for ids in self._in_flight.values() for i in ids} | set(self._due)
            taken |= {i for ids in self._in_transit.values() for i in ids} | set(self._settling)
            entries = [e for e in queued if e.get("id") not in taken]
            if ticket:
                self._in_flight[ticket] = [e["id"] for e in entries]
        return entries, self._withheld(queued) if entries else 0

    def _withheld(self, queued: list[dict[str, Any]]) -> int:
        count = getattr(self.backend, "withheld_notices", None)  # a backend without it: no line
        if count is None:
            return 0
        try:
            return int(count(self.claimed(), agent_id=self.agent_id, shown=queued))
        except Exception:  # noqa: BLE001 - the line is a courtesy; the notices ride along without it
            failure_log.exception("counting the withheld notices of %s failed", self.session_key)
            return 0

    def call(
        self,
        name: str,
        args: dict[str, Any] | None,
        ticket: int = 0,
        scope: frozenset[str] | None = None,
        session: str | None = None,
        meta: Any = None,
    ) -> ToolOutcome:
        """``scope``: the agents a scoped bearer token covers (HTTP transport); None is unrestricted.
        ``session``: the MCP session calling (HTTP transport), whose earlier answers this call confirms.
        ``meta``: the call's ``_meta`` (a host may name its session there: a late binding)."""
        caller = self.resolve(meta)
        if caller is None:
            return ToolOutcome(
                {
                    "error": {
                        "code": "unavailable",
                        "message": "this server does not know its session yet: the host names it in a tool "
                        "call's _meta (Codex: threadId) or in what its hooks registered, and neither has "
                        "come; the session's first prompt or tool call brings it",
                    }
                },
                [],
                ticket,
            )
        self.confirm(session)
        self.settle()  # what earlier answers delivered must not ride along again
        try:
            extra: dict[str, Any] = {} if scope is None else {"scope": scope}
            payload = self.backend.call_tool(name, dict(args or {}), caller=caller, agent_id=self.agent_id, **extra)
        except SessionwatchError as exc:  # a remote gateway raises what the engine would have returned
            payload = exc.to_json()
        except Exception as exc:  # noqa: BLE001 - any failure is the tool's error result (logged)
            failure_log.exception("tool %s failed", name, per=name)
            payload = {"error": {"code": "unavailable", "message": f"{name} failed: {exc}"}}
        # Read after the call so notices that arose while it ran (a long sessions_send wait) come along too.
        entries, withheld = self._attachment(ticket)
        return ToolOutcome(payload, entries, ticket, withheld)
