"""One MCP server for every session of a host process: each call runs as the session it names.

OpenCode starts one MCP server per project for all the sessions its process runs (the TUI switches between
them, a server serves many) and tells it nothing of the session calling. sessionwatch's plugin adds the
session to each call of ours, as the hidden argument ``hosts.identity.CALL_ARG`` (OpenCode lets a plugin
change a tool call's arguments before it runs); the server takes it out and runs the call on a
``SessionBinding`` of that session's key, one per session: the key the hook gives the same session (its
adoption link's, else the host session's own; ``$SESSIONWATCH_SESSION`` pins one), made on its first
call. Each binding keeps its own delivery bookkeeping (notices ride along and are acknowledged once the
answer was written, exactly as for a bound server); a call that names no session is refused with an error
result.

Only for stdio: a server a host starts. It serves no notices resource (there is no one session to watch).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

from ..hosts.identity import call_session_key
from ..hosts.registry import ROOMS
from .binding import SessionBinding, ToolBackend, ToolOutcome, failure_log

log = logging.getLogger("sessionwatch.mcp")

SESSION_ENV = "SESSIONWATCH_SESSION"  # as for the hook: one key pinned in the host's environment

MAX_SESSIONS = 256  # bindings kept; a session that calls again after the oldest went gets a fresh one


class Unnamed(SessionBinding):
    """Where a call that names no session runs: an error result, nothing taken from any queue."""

    def __init__(self, backend: ToolBackend, host: str) -> None:
        super().__init__(backend, "")
        self.host = host

    def call(
        self,
        name: str,
        args: dict[str, Any] | None,
        ticket: int = 0,
        scope: frozenset[str] | None = None,
        session: str | None = None,
        meta: Any = None,
    ) -> ToolOutcome:
        label = ROOMS[self.host].label if self.host in ROOMS else self.host
        message = (
            f"this sessionwatch MCP server serves every {label} session of its process, and the call does not "
            f"say which one: sessionwatch's {label} plugin names it (sessionwatch install {self.host}), or give "
            "the server --session KEY"
        )
        return ToolOutcome({"error": {"code": "invalid_argument", "message": message}}, [], ticket)


class SessionOfCalls(SessionBinding):
    """One session's binding in a routed server. On its first call, on the call's worker thread (never on the
    event loop), it settles which session it is (``resolve``: an adoption link may name another key than
    the host session's own, as for the hook) and makes it when missing."""

    def __init__(self, backend: ToolBackend, session_key: str, resolve: Callable[[], str] | None = None) -> None:
        super().__init__(backend, session_key)
        self._resolve = resolve
        self._made = False
        self._first = threading.Lock()

    def call(
        self,
        name: str,
        args: dict[str, Any] | None,
        ticket: int = 0,
        scope: frozenset[str] | None = None,
        session: str | None = None,
        meta: Any = None,
    ) -> ToolOutcome:
        with self._first:
            if not self._made:
                self._settle_session()
        return super().call(name, args, ticket, scope, session, meta)

    def _settle_session(self) -> None:
        if self._resolve is not None:
            try:
                key = self._resolve()
            except Exception:  # noqa: BLE001 - the host session's own key stands (logged)
                failure_log.exception("looking up the session of %s failed", self.session_key)
            else:
                if key != self.session_key:
                    log.info("%s runs as %s (its adoption link)", self.session_key, key)
                    self.session_key = key
        try:
            self.ensure_session()
            self._made = True
        except Exception:  # noqa: BLE001 - the call itself says what is wrong with the store
            failure_log.exception("creating session %s failed", self.session_key)


class RoutedBinding:
    """The binding of a server whose calls name their session (see the module's doc). It offers what the
    server, the stdio transport and the delivery bookkeeping ask of a ``SessionBinding``."""

    session_key: str | None = None  # no one session: the server's instructions say so, no notices resource
    agent_id: str | None = None

    def __init__(self, backend: ToolBackend, host: str, agent: str | None = None) -> None:
        self.backend = backend
        self.host = host
        self.agent = agent  # the agent of the keys (--agent); else each session's folder
        # one key pinned in the host's environment, as the hook takes it: every call runs as it
        self.pinned = os.environ.get(SESSION_ENV) or None
        self._bindings: OrderedDict[str, SessionBinding] = OrderedDict()
        self._lock = threading.Lock()
        self._reports_writes = False

    @property
    def reports_writes(self) -> bool:
        return self._reports_writes

    @reports_writes.setter
    def reports_writes(self, value: bool) -> None:
        with self._lock:
            self._reports_writes = value
            for binding in self._bindings.values():
                binding.reports_writes = value

    def ensure_session(self) -> dict[str, Any]:
        return {}  # each session is made on its first call

    def for_call(self, named: object = None) -> SessionBinding:
        """The binding of the session ``named`` (the call's ``CALL_ARG``), made on its first call. No store
        is read here (this runs on the event loop): the binding settles its session on its first call."""
        key = self.pinned or call_session_key(self.host, self.agent, named)
        if key is None:
            return Unnamed(self.backend, self.host)
        with self._lock:
            binding = self._bindings.get(key)
            if binding is None:
                log.info("serving %s", key)
                resolve = None if self.pinned else partial(self._linked, key, named)
                binding = SessionOfCalls(self.backend, key, resolve)
                binding.reports_writes = self._reports_writes
                self._bindings[key] = binding
                while len(self._bindings) > MAX_SESSIONS:  # what the oldest had not acknowledged comes again
                    self._bindings.popitem(last=False)
            self._bindings.move_to_end(key)
        return binding

    def _linked(self, own: str, named: Any) -> str:
        """The key a call's session runs as: the one the thread's adoption link names, when the store tells
        (a gateway lists no links by thread: there, as for the hook, the host session's own key)."""
        thread_links = getattr(self.backend, "thread_links", None)
        thread = named.get("session_id") if isinstance(named, dict) else None
        if thread_links is None or not isinstance(thread, str) or self.host not in ROOMS:
            return own
        try:
            links = list(thread_links(ROOMS[self.host].hook.catalog, thread, None))
        except AttributeError:  # a remote gateway: no such operation
            return own
        return call_session_key(self.host, self.agent, named, links) or own

    def written(self, request_id: object) -> bool:
        """The transport wrote the answer to ``request_id``: the binding that answered it takes note."""
        with self._lock:
            bindings = list(self._bindings.values())
        return any(b.written(request_id) for b in bindings)

    def settle(self) -> None:
        with self._lock:
            bindings = list(self._bindings.values())
        for binding in bindings:
            binding.settle()
