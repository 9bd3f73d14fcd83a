"""The gateway's host operations over HTTP, declared once: each one's Python signature and the request it is.

``GatewayClient`` and ``AsyncGatewayClient`` (``client.py``) take their methods from this declaration
(``sync`` and ``asynchronous`` turn a declared stub into a method), and the CLI's remote mode
(``cli/backend.py``) offers exactly the names declared here, so the sync client, the async client and
the CLI cannot drift apart. A declaration names:

- the HTTP method and the path, where ``{param}`` is a parameter of the stub, sent as one path segment;
- ``body``: JSON field -> parameter (a None value is left out, unless ``keep_none``; ``{}`` sends an
  empty object), or ``payload``: the parameter whose mapping is the whole body;
- ``query``: query field -> parameter (a None value is left out);
- ``result``: the field of the answer returned (None: the whole answer), then ``convert`` applied;
- ``shape``: adjusts the bound arguments first (a default the client fills in), ``timeout``: the HTTP
  timeout when the call itself waits on the server, ``known``: the answer without asking, when the
  arguments already tell it (else None).

The few methods that are not one request and its answer are written by hand in ``client.py``:
``CLIENT_METHODS``.
"""

from __future__ import annotations

import functools
import inspect
import os
import socket
from collections.abc import Callable, Coroutine, Mapping, Sized
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import quote

from .engine.stores import PruneResult  # the engine's own result type, so both sides return one class
from .types import QueueEntry

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

# Written by hand in both client classes: a tool call and health answer errors instead of raising, the
# streams are iterators, close ends the connection pool.
CLIENT_METHODS = ("call_tool", "health", "stream_wakes", "follow_log", "close")


def segment(value: object) -> str:
    """One path segment; ':' stays readable, '/' and everything else unsafe is percent-encoded."""
    return quote(str(value), safe=":@")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any] | None
    params: dict[str, Any] | None
    timeout: float | None  # None: the client's own


@dataclass(frozen=True)
class Op:
    """One declared operation (see the module's docstring for each field)."""

    name: str
    method: str
    path: str
    signature: inspect.Signature
    body: Mapping[str, str] | None = None
    payload: str | None = None
    keep_none: bool = False
    query: Mapping[str, str] | None = None
    result: str | None = None
    convert: Callable[[Any], Any] | None = None
    shape: Callable[[dict[str, Any]], None] | None = None
    timeout: Callable[[float, Mapping[str, Any]], float] | None = None
    params: tuple[str, ...] = field(default=())
    known: Callable[[Mapping[str, Any]], Any] | None = None

    def known_answer(self, client: object, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """The answer the arguments already give (no request), or None."""
        if self.known is None:
            return None
        bound = self.signature.bind(client, *args, **kwargs)
        bound.apply_defaults()
        return self.known(bound.arguments)

    def request(self, client: object, args: tuple[Any, ...], kwargs: Mapping[str, Any], base: float) -> Request:
        bound = self.signature.bind(client, *args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        if self.shape is not None:
            self.shape(a)
        path = self.path.format(**{p: segment(a[p]) for p in self.params})
        body: dict[str, Any] | None = None
        if self.payload is not None:
            body = dict(a[self.payload])
        elif self.body is not None:
            body = {f: a[p] for f, p in self.body.items() if self.keep_none or a[p] is not None}
        params = {f: a[p] for f, p in (self.query or {}).items()}
        return Request(self.method, path, body, params, None if self.timeout is None else self.timeout(base, a))

    def answer(self, data: Any) -> Any:
        value = data if self.result is None else data[self.result]
        return value if self.convert is None else self.convert(value)


OPS: dict[str, Op] = {}


def operation(
    method: str,
    path: str,
    *,
    body: Mapping[str, str] | None = None,
    payload: str | None = None,
    keep_none: bool = False,
    query: Mapping[str, str] | None = None,
    result: str | None = None,
    convert: Callable[[Any], Any] | None = None,
    shape: Callable[[dict[str, Any]], None] | None = None,
    timeout: Callable[[float, Mapping[str, Any]], float] | None = None,
    known: Callable[[Mapping[str, Any]], Any] | None = None,
) -> Callable[[F], F]:
    """Declare the stub below as an operation (it stays the stub: the clients build the methods)."""

    def declare(fn: F) -> F:
        sig = inspect.signature(fn)
        params = tuple(p for p in sig.parameters if "{" + p + "}" in path)
        named = {*(body or {}).values(), *(query or {}).values(), *params, *([payload] if payload else [])}
        unknown = named - set(sig.parameters)
        assert not unknown, f"{fn.__name__}: the declaration names no such parameter {sorted(unknown)}"
        OPS[fn.__name__] = Op(
            fn.__name__,
            method,
            path,
            sig,
            body,
            payload,
            keep_none,
            query,
            result,
            convert,
            shape,
            timeout,
            params,
            known,
        )
        return fn

    return declare


def sync(stub: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """The blocking method of a declared operation (``GatewayClient``)."""
    op = OPS[stub.__name__]

    def call(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        known = op.known_answer(self, args, kwargs)
        if known is not None:
            return known
        req = op.request(self, args, kwargs, self.timeout)
        return op.answer(self._request(req.method, req.path, body=req.body, params=req.params, timeout=req.timeout))

    functools.update_wrapper(call, stub)
    return call


def asynchronous(stub: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The coroutine method of a declared operation (``AsyncGatewayClient``)."""
    op = OPS[stub.__name__]

    async def call(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        known = op.known_answer(self, args, kwargs)
        if known is not None:
            return known
        req = op.request(self, args, kwargs, self.timeout)
        data = await self._request(req.method, req.path, body=req.body, params=req.params, timeout=req.timeout)
        return op.answer(data)

    functools.update_wrapper(call, stub)
    return call


def covers(cls: type) -> None:
    """A client class offers every declared operation and the hand-written ones, nothing else public."""
    public = {n for n, m in vars(cls).items() if not n.startswith("_") and callable(m)}
    public |= {n for base in cls.__mro__[1:] for n in vars(base) if n in CLIENT_METHODS}
    assert public == set(OPS) | set(CLIENT_METHODS), (cls.__name__, sorted(public ^ (set(OPS) | set(CLIENT_METHODS))))


# -- what a few operations add --------------------------------------------------------------------------
def _this_machine(a: dict[str, Any]) -> None:
    """A pid without a machine is one of this machine (the client's, not the gateway's)."""
    if a["pid"] is not None and a["machine"] is None:
        # twin: engine/lifecycle.py::this_machine (not imported: the client stays light to import)
        a["machine"] = os.environ.get("SESSIONWATCH_MACHINE") or socket.gethostname()


def _imported_flag(a: dict[str, Any]) -> None:
    a["imported"] = True if a["imported"] else None  # sent only when set


def _id_list(a: dict[str, Any]) -> None:
    a["ids"] = list(a["ids"]) if isinstance(a["ids"], (list, tuple)) else a["ids"]


def _nudge_timeout(base: float, a: Mapping[str, Any]) -> float:
    """A nudge answers after looking for up to ``wait_ms``: the HTTP timeout outlasts that."""
    wait_ms = a["wait_ms"]
    wait = wait_ms / 1000 if isinstance(wait_ms, int) and not isinstance(wait_ms, bool) and wait_ms > 0 else 0.0
    return base + min(wait, 10.0)


def _prune_result(data: Mapping[str, Any]) -> PruneResult:
    return PruneResult(
        rows_deleted=data["rowsDeleted"],
        cursors_deleted=data["cursorsDeleted"],
        heads_stamped=data["headsStamped"],
        skipped=data["skipped"],
    )


S = "/v1/sessions/{key}"
AGENT = {"agentId": "agent_id"}


class Operations(Protocol):
    """The declaration: one stub per operation, its signature the same as ``Gateway``'s method."""

    # -- sessions --------------------------------------------------------------------------------
    @operation(
        "PUT",
        S,
        body={
            "agentId": "agent_id",
            "kind": "kind",
            "spawnedBy": "spawned_by",
            "label": "label",
            "createdBy": "created_by",
        },
    )
    def put_session(
        self,
        key: object,
        *,
        agent_id: object = None,
        kind: object = None,
        spawned_by: object = None,
        label: object = None,
        created_by: object = None,
    ) -> dict[str, Any]: ...

    @operation("GET", S, query=AGENT)
    def get_session(self, key: object, agent_id: object = None) -> dict[str, Any]: ...

    @operation("DELETE", S, query=AGENT)
    def delete_session(self, key: object, agent_id: object = None) -> dict[str, Any]: ...

    @operation("POST", S + "/reset", body=AGENT)
    def reset_session(self, key: object, *, agent_id: object = None) -> dict[str, Any]: ...

    # -- producers -------------------------------------------------------------------------------
    @operation(
        "POST",
        S + "/inbound",
        body={
            "text": "text",
            "channel": "channel",
            "provenance": "provenance",
            "sourceSessionKey": "source_session_key",
            "humanId": "human_id",
            "lane": "lane",
            "occurredAt": "occurred_at",
            "runId": "run_id",
            "agentId": "agent_id",
            "dedupeKey": "dedupe_key",
        },
    )
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
    ) -> dict[str, Any]: ...

    @operation(
        "POST",
        S + "/goal",
        body={
            "action": "action",
            "objective": "objective",
            "status": "status",
            "actor": "actor",
            "agentId": "agent_id",
        },
    )
    def set_goal(
        self,
        key: object,
        action: object,
        *,
        objective: object = None,
        status: object = None,
        actor: object = None,
        agent_id: object = None,
    ) -> dict[str, Any]: ...

    @operation("POST", S + "/runs", body={"runId": "run_id", **AGENT})
    def begin_run(self, key: object, run_id: object, *, agent_id: object = None) -> dict[str, Any]: ...

    @operation("POST", S + "/runs/{run_id}/end", body={"status": "status", **AGENT})
    def end_run(self, key: object, run_id: object, status: object, *, agent_id: object = None) -> dict[str, Any]: ...

    @operation("POST", S + "/compactions", body={"operationId": "operation_id", **AGENT})
    def record_compaction(self, key: object, operation_id: object, *, agent_id: object = None) -> dict[str, Any]: ...

    @operation(
        "POST",
        S + "/lifecycle",
        body={
            "state": "state",
            "agentId": "agent_id",
            "pid": "pid",
            "host": "host",
            "machine": "machine",
            "outcome": "outcome",
            "at": "at",
        },
        shape=_this_machine,
    )
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
        """``Gateway.report_lifecycle`` over HTTP. A pid without a machine is one of this machine (the
        client's, not the gateway's), so a remote gateway still checks it only where it runs."""
        ...

    @operation(
        "POST",
        S + "/lifecycle/gone",
        body={"agentId": "agent_id", "pid": "pid", "machine": "machine"},
        shape=_this_machine,
    )
    def report_host_gone(
        self, key: object, *, agent_id: object = None, pid: object = None, machine: object = None
    ) -> dict[str, Any]:
        """``Gateway.report_host_gone`` over HTTP (a pid without a machine is one of this machine)."""
        ...

    @operation(
        "POST",
        S + "/messages",
        body={"role": "role", "text": "text", "agentId": "agent_id", "imported": "imported"},
        shape=_imported_flag,
    )
    def append_message(
        self, key: object, role: object, text: object, *, agent_id: object = None, imported: bool = False
    ) -> dict[str, Any]: ...

    # -- queue and watches -----------------------------------------------------------------------
    @operation("POST", S + "/system-events", body={"text": "text", "contextKey": "context_key", **AGENT})
    def enqueue_system_event(
        self, key: object, text: object, *, context_key: object = None, agent_id: object = None
    ) -> dict[str, Any]: ...

    @operation("GET", S + "/system-events", query=AGENT, result="entries")
    def peek_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]: ...

    @operation(
        "GET",
        S + "/system-events",
        query=AGENT,
        convert=lambda answer: int(answer.get("withheld") or 0),
        known=lambda a: 0 if a["shown"] is not None and not len(a["shown"]) else None,
    )
    def withheld_notices(self, key: object, *, agent_id: object = None, shown: Sized | None = None) -> int:
        """How many more watched sessions changed than the full queue holds notices for (the peek's
        ``withheld``; 0 from a gateway that does not count them). ``shown`` empty: nothing is asked."""
        ...

    @operation("POST", S + "/system-events/drain", body=AGENT, result="entries")
    def drain_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]: ...

    @operation("POST", S + "/system-events/ack", body={"ids": "ids", **AGENT}, shape=_id_list)
    def ack_system_events(self, key: object, ids: Any, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries (ids from a peek) once you have them: ``{acknowledged: n}``."""
        ...

    @operation("POST", "/v1/watch", body={"watcher": "watcher", "target": "target", **AGENT}, result="watched")
    def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool: ...

    @operation(
        "POST", "/v1/unwatch", body={"watcher": "watcher", "target": "target"}, keep_none=True, result="unwatched"
    )
    def unwatch(self, watcher: object, target: object) -> bool: ...

    @operation("GET", "/v1/cursors", query={"watcher": "watcher", "target": "target"}, result="cursors")
    def cursors(self, *, watcher: object = None, target: object = None) -> list[dict[str, Any]]: ...

    # -- reconciliation and the log --------------------------------------------------------------
    @operation("GET", S + "/state-version", query=AGENT, result="stateVersion", convert=int)
    def state_version(self, key: object, agent_id: object = None) -> int: ...

    @operation("GET", "/v1/events", query={"after": "after", "limit": "limit"}, result="events")
    def events_after(self, after: object = 0, limit: object = 200) -> list[dict[str, Any]]: ...

    # -- maintenance -----------------------------------------------------------------------------
    @operation("POST", "/v1/prune", body={"force": "force"}, keep_none=True, convert=_prune_result)
    def prune(self, *, force: bool = True) -> PruneResult: ...

    @operation("POST", "/v1/sweep", body={}, result="swept", convert=int)
    def sweep(self) -> int: ...

    # -- upstream --------------------------------------------------------------------------------
    @operation("GET", "/v1/catalogs/{catalog_id}/threads", result="threads")
    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]: ...

    @operation(
        "POST",
        "/v1/catalogs/{catalog_id}/threads/{thread_id}/continue",
        body={"sessionKey": "session_key", "agentId": "agent_id", "hostId": "host_id"},
    )
    def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = "gateway:local",
    ) -> dict[str, Any]: ...

    @operation("GET", "/v1/sessions/{session_key}/link", query=AGENT, result="link")
    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None: ...

    @operation("POST", "/v1/upstream/tick", body={})
    def upstream_tick(self) -> dict[str, Any]: ...

    @operation(
        "POST",
        "/v1/sessions/{session_key}/nudge",
        body={"agentId": "agent_id", "waitMs": "wait_ms"},
        keep_none=True,
        timeout=_nudge_timeout,
    )
    def nudge(self, session_key: object, agent_id: object = None, *, wait_ms: object = 0) -> dict[str, Any]: ...

    @operation("POST", "/v1/sessions/{session_key}/hooks/{host}", payload="payload", query=AGENT)
    def answer_hook(
        self, session_key: object, host: str, payload: Mapping[str, Any], *, agent_id: object = None
    ) -> dict[str, Any]:
        """The gateway's answer to a host's hook input for the session ({} when nothing is pending)."""
        ...

    @operation("GET", "/v1/sessions/{session_key}/hooks/handed-out", query=AGENT)
    def hooks_handed_out(self, session_key: object, *, agent_id: object = None) -> dict[str, Any]:
        """``{ids}``: the entries the gateway's hook route handed to the session's host, not yet acked."""
        ...

    @operation("GET", "/v1/upstream/results")
    def upstream_results(self) -> dict[str, Any]: ...

    @operation("PUT", "/v1/nodes/{node_id}", body={"url": "url", "token": "token"}, keep_none=True)
    def pair_node(self, node_id: str, url: str, token: str) -> dict[str, Any]: ...
