"""``GatewayClient`` and ``AsyncGatewayClient``: the Gateway's Python API over HTTP, for processes that talk
to ``sessionwatch serve``.

Methods take the same arguments and return the same values as :class:`sessionwatch.Gateway` (the async
client's are coroutines; ``stream_wakes`` is an async iterator there). Host operations raise the matching
:class:`SessionwatchError` subclass on an error response; ``call_tool`` returns the error object, like
``Gateway.call_tool``.

    with GatewayClient("http://127.0.0.1:7878", token=None) as gw:
        gw.put_session("agent:main:main")
        gw.call_tool("session_status", {}, caller="agent:main:main")

    async with AsyncGatewayClient("http://127.0.0.1:7878") as gw:
        await gw.call_tool("session_status", {}, caller="agent:main:main")

The two classes share everything but the I/O: paths, headers, timeouts and the reading of answers and
wake streams are the module-level helpers below, so each method is one request line in both. The
parity test (tests/test_client_parity.py) fails when their methods or signatures drift apart from
``Gateway``'s.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Iterator, Mapping, Sized
from typing import Any
from urllib.parse import quote

import httpx

from . import log_follow
from .errors import InvalidArgument, SessionwatchError, StoreUnavailable, StoreUnreachable, error_from_json
from .headers import encode_header_value
from .store.records import PruneResult
from .types import QueueEntry


def _seg(value: object) -> str:
    """One path segment; ':' stays readable, '/' and everything else unsafe is percent-encoded."""
    return quote(str(value), safe=":@")


def _drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _ack_body(ids: Any, agent_id: object) -> dict[str, Any]:
    return _drop_none({"ids": list(ids) if isinstance(ids, (list, tuple)) else ids, "agentId": agent_id})


def _session_path(key: object, suffix: str = "") -> str:
    return f"/v1/sessions/{_seg(key)}{suffix}"


def caller_headers(caller: str, agent_id: str | None) -> dict[str, str]:
    """The headers naming the calling session of a tool call (the one place they are built)."""
    # Percent-encoded UTF-8 (sessionwatch.headers), so any valid key can call a tool.
    headers = {"X-Session-Key": encode_header_value(str(caller))}
    if agent_id is not None:
        headers["X-Agent-Id"] = encode_header_value(str(agent_id))
    return headers


def _nudge_timeout(base: float, wait_ms: object) -> float:
    """A nudge answers after looking for up to ``wait_ms``: the HTTP timeout outlasts that."""
    wait = wait_ms / 1000 if isinstance(wait_ms, int) and not isinstance(wait_ms, bool) and wait_ms > 0 else 0.0
    return base + min(wait, 10.0)


def _tool_timeout(base: float, args: Mapping[str, Any]) -> float:
    """A ``sessions_send`` that waits for a reply needs the HTTP timeout to outlast its wait."""
    wait = args.get("timeoutSeconds")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0:
        return max(base, float(wait) + 10)
    return base


def _decode(res: httpx.Response) -> Any:
    try:
        return res.json()
    except ValueError:
        return None


def _answer(res: httpx.Response, path: str) -> Any:
    """The decoded body of a host operation; an error response raises the matching exception."""
    data = _decode(res)
    if res.status_code >= 400:
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            raise error_from_json(data)
        raise (StoreUnavailable if res.status_code >= 500 else SessionwatchError)(
            f"HTTP {res.status_code} from {path}: {res.text[:200]}"
        )
    return data


def _tool_answer(res: httpx.Response) -> dict[str, Any]:
    """A tool's result or its error object (never raised, like ``Gateway.call_tool``)."""
    data = _decode(res)
    if isinstance(data, dict):
        return data
    return {"error": {"code": "unavailable", "message": f"HTTP {res.status_code}: {res.text[:200]}"}}


def _tool_failure(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, StoreUnavailable):
        return exc.to_json()  # with retryAfter: the gateway did not answer, try again
    return {"error": {"code": "invalid_argument", "message": str(exc)}}


def _prune_result(data: Mapping[str, Any]) -> PruneResult:
    return PruneResult(
        rows_deleted=data["rowsDeleted"],
        cursors_deleted=data["cursorsDeleted"],
        heads_stamped=data["headsStamped"],
        skipped=data["skipped"],
    )


def _health(res: httpx.Response) -> dict[str, Any]:
    data = _decode(res)
    return data if isinstance(data, dict) else {"status": "unknown", "httpStatus": res.status_code}


def _stream_refused(res: httpx.Response) -> SessionwatchError:
    data = _decode(res)
    return (
        error_from_json(data) if isinstance(data, dict) else StoreUnavailable(f"HTTP {res.status_code} from /v1/stream")
    )


def _lifecycle_body(
    state: object, agent_id: object, pid: object, host: object, machine: object, outcome: object, at: object
) -> dict[str, Any]:
    if pid is not None and machine is None:
        # twin: engine/lifecycle.py::this_machine (not imported: the client stays light to import)
        machine = os.environ.get("SESSIONWATCH_MACHINE") or socket.gethostname()
    return _drop_none(
        {
            "state": state,
            "agentId": agent_id,
            "pid": pid,
            "host": host,
            "machine": machine,
            "outcome": outcome,
            "at": at,
        }
    )


class _WakeParser:
    """Server-sent events, one line at a time: ``feed`` returns a wake dict when one is complete."""

    def __init__(self) -> None:
        self.event = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> dict[str, Any] | None:
        if line == "":
            wake = json.loads("\n".join(self.data)) if self.event == "wake" and self.data else None
            self.event, self.data = "message", []
            return wake
        if not line.startswith(":"):  # ':' lines are keep-alive comments
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                self.event = value
            elif name == "data":
                self.data.append(value)
        return None


class _ClientBase:
    def __init__(self, base_url: str, token: str | None, timeout: float) -> None:
        if not isinstance(base_url, str) or not base_url.lower().startswith(("http://", "https://")):
            raise InvalidArgument(f"the gateway URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def _unreachable(self, exc: Exception) -> StoreUnavailable:
        return StoreUnreachable(f"gateway at {self.base_url} unreachable: {exc.__class__.__name__}: {exc}")

    def _kw(
        self,
        body: Mapping[str, Any] | None,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        timeout: float | None,
    ) -> dict[str, Any]:
        return {
            "json": None if body is None else dict(body),
            "params": _drop_none(params or {}) or None,
            "headers": headers,
            "timeout": self.timeout if timeout is None else timeout,
        }


class GatewayClient(_ClientBase):
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        super().__init__(base_url, token, timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout)

    # -- plumbing --------------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        try:
            return self._http.request(method, path, **self._kw(body, params, headers, timeout))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        return _answer(self._send(method, path, **kw), path)

    def _session(self, method: str, key: object, suffix: str = "", **kw: Any) -> Any:
        return self._request(method, _session_path(key, suffix), **kw)

    # -- tools -----------------------------------------------------------------------------------
    def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, caller: str, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Run one tool as ``caller``; errors come back as ``{"error": {"code", "message"}}``."""
        args = dict(args or {})
        try:
            res = self._send(
                "POST",
                f"/v1/tools/{_seg(name)}",
                body=args,
                headers=caller_headers(caller, agent_id),
                timeout=_tool_timeout(self.timeout, args),
            )
        except (StoreUnavailable, UnicodeEncodeError) as exc:
            return _tool_failure(exc)
        return _tool_answer(res)

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
        return self._session(
            "PUT",
            key,
            body=_drop_none(
                {"agentId": agent_id, "kind": kind, "spawnedBy": spawned_by, "label": label, "createdBy": created_by}
            ),
        )

    def get_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return self._session("GET", key, params={"agentId": agent_id})

    def delete_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return self._session("DELETE", key, params={"agentId": agent_id})

    def reset_session(self, key: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/reset", body=_drop_none({"agentId": agent_id}))

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
        return self._session(
            "POST",
            key,
            "/inbound",
            body=_drop_none(
                {
                    "text": text,
                    "channel": channel,
                    "provenance": provenance,
                    "sourceSessionKey": source_session_key,
                    "humanId": human_id,
                    "lane": lane,
                    "occurredAt": occurred_at,
                    "runId": run_id,
                    "agentId": agent_id,
                    "dedupeKey": dedupe_key,
                }
            ),
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
    ) -> dict[str, Any]:
        return self._session(
            "POST",
            key,
            "/goal",
            body=_drop_none(
                {"action": action, "objective": objective, "status": status, "actor": actor, "agentId": agent_id}
            ),
        )

    def begin_run(self, key: object, run_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/runs", body=_drop_none({"runId": run_id, "agentId": agent_id}))

    def end_run(self, key: object, run_id: object, status: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session(
            "POST", key, f"/runs/{_seg(run_id)}/end", body=_drop_none({"status": status, "agentId": agent_id})
        )

    def record_compaction(self, key: object, operation_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session(
            "POST", key, "/compactions", body=_drop_none({"operationId": operation_id, "agentId": agent_id})
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
        return self._session(
            "POST", key, "/lifecycle", body=_lifecycle_body(state, agent_id, pid, host, machine, outcome, at)
        )

    def append_message(
        self, key: object, role: object, text: object, *, agent_id: object = None, imported: bool = False
    ) -> dict[str, Any]:
        body = _drop_none({"role": role, "text": text, "agentId": agent_id})
        if imported:
            body["imported"] = True
        return self._session("POST", key, "/messages", body=body)

    # -- queue and watches -----------------------------------------------------------------------
    def enqueue_system_event(
        self, key: object, text: object, *, context_key: object = None, agent_id: object = None
    ) -> dict[str, Any]:
        return self._session(
            "POST",
            key,
            "/system-events",
            body=_drop_none({"text": text, "contextKey": context_key, "agentId": agent_id}),
        )

    def peek_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]:
        return self._session("GET", key, "/system-events", params={"agentId": agent_id})["entries"]

    def withheld_notices(self, key: object, *, agent_id: object = None, shown: Sized | None = None) -> int:
        """How many more watched sessions changed than the full queue holds notices for (the peek's
        ``withheld``; 0 from a gateway that does not count them). ``shown`` empty: nothing is asked."""
        if shown is not None and not len(shown):
            return 0
        body = self._session("GET", key, "/system-events", params={"agentId": agent_id})
        return int(body.get("withheld") or 0)

    def drain_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]:
        return self._session("POST", key, "/system-events/drain", body=_drop_none({"agentId": agent_id}))["entries"]

    def ack_system_events(self, key: object, ids: Any, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries (ids from a peek) once you have them: ``{acknowledged: n}``."""
        return self._session("POST", key, "/system-events/ack", body=_ack_body(ids, agent_id))

    def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool:
        return self._request(
            "POST", "/v1/watch", body=_drop_none({"watcher": watcher, "target": target, "agentId": agent_id})
        )["watched"]

    def unwatch(self, watcher: object, target: object) -> bool:
        return self._request("POST", "/v1/unwatch", body={"watcher": watcher, "target": target})["unwatched"]

    def cursors(self, *, watcher: object = None, target: object = None) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/cursors", params={"watcher": watcher, "target": target})["cursors"]

    # -- reconciliation and the log --------------------------------------------------------------
    def state_version(self, key: object, agent_id: object = None) -> int:
        return int(self._session("GET", key, "/state-version", params={"agentId": agent_id})["stateVersion"])

    def events_after(self, after: object = 0, limit: object = 200) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/events", params={"after": after, "limit": limit})["events"]

    # -- maintenance -----------------------------------------------------------------------------
    def prune(self, *, force: bool = True) -> PruneResult:
        return _prune_result(self._request("POST", "/v1/prune", body={"force": force}))

    def sweep(self) -> int:
        return int(self._request("POST", "/v1/sweep", body={})["swept"])

    def health(self) -> dict[str, Any]:
        """``{status, ...}``; answers (never raises) while the gateway is starting."""
        return _health(self._send("GET", "/v1/health"))

    # -- upstream --------------------------------------------------------------------------------
    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        return self._request("GET", f"/v1/catalogs/{_seg(catalog_id)}/threads")["threads"]

    def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = "gateway:local",
    ) -> dict[str, Any]:
        return self._request(
            "POST",
            f"/v1/catalogs/{_seg(catalog_id)}/threads/{_seg(thread_id)}/continue",
            body=_drop_none({"sessionKey": session_key, "agentId": agent_id, "hostId": host_id}),
        )

    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        return self._session("GET", session_key, "/link", params={"agentId": agent_id})["link"]

    def upstream_tick(self) -> dict[str, Any]:
        return self._request("POST", "/v1/upstream/tick", body={})

    def nudge(self, session_key: object, agent_id: object = None, *, wait_ms: object = 0) -> dict[str, Any]:
        body = {"agentId": agent_id, "waitMs": wait_ms}
        timeout = _nudge_timeout(self.timeout, wait_ms)
        return self._session("POST", session_key, "/nudge", body=body, timeout=timeout)

    def answer_hook(
        self, session_key: object, host: str, payload: Mapping[str, Any], *, agent_id: object = None
    ) -> dict[str, Any]:
        """The gateway's answer to a host's hook input for the session ({} when nothing is pending)."""
        return self._session("POST", session_key, f"/hooks/{host}", body=dict(payload), params={"agentId": agent_id})

    def upstream_results(self) -> dict[str, Any]:
        return self._request("GET", "/v1/upstream/results")

    def pair_node(self, node_id: str, url: str, token: str) -> dict[str, Any]:
        return self._request("PUT", f"/v1/nodes/{_seg(node_id)}", body={"url": url, "token": token})

    # -- wakes -----------------------------------------------------------------------------------
    def stream_wakes(self, key: str, *, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield wake dicts ``{watcher, target, reason, at, trailing}`` as they arrive (blocking).

        ``timeout`` bounds the wait for the next line (keep-alives count); None waits forever.
        Closing the generator closes the connection (the gateway unsubscribes).
        """
        read = httpx.Timeout(self.timeout, read=timeout)
        try:
            with self._http.stream("GET", "/v1/stream", params={"sessionKey": key}, timeout=read) as res:
                if res.status_code >= 400:
                    res.read()
                    raise _stream_refused(res)
                parser = _WakeParser()
                for line in res.iter_lines():
                    wake = parser.feed(line)
                    if wake is not None:
                        yield wake
        except httpx.ReadTimeout:
            raise TimeoutError(f"no data from the wake stream within {timeout} s") from None
        except httpx.HTTPError as exc:
            raise StoreUnavailable(
                f"wake stream from {self.base_url} failed: {exc.__class__.__name__}: {exc}"
            ) from None

    # -- the log stream (sessionwatch.log_follow) -------------------------------------------------
    def follow_log(
        self,
        after: int | None = None,
        *,
        session: str | None = None,
        agent: str | None = None,
        kinds: list[str] | None = None,
        reconnect: bool = True,
        timeout: float | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Yield log events after ``after`` (None: from now) as they are recorded, reconnecting with
        ``Last-Event-ID`` after a drop (nothing missed, nothing repeated). A gap dict ``{historyGap: true,
        earliestAvailableSequence, after, prunedThrough}`` comes first when retention removed events."""
        return log_follow.follow(
            self._http,
            self.base_url,
            after,
            log_follow.params(session, agent, kinds),
            reconnect=reconnect,
            timeout=timeout,
        )


class AsyncGatewayClient(_ClientBase):
    """``GatewayClient`` for asyncio/anyio code: the same methods, as coroutines."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        super().__init__(base_url, token, timeout)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)

    # -- plumbing --------------------------------------------------------------------------------
    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        try:
            return await self._http.request(method, path, **self._kw(body, params, headers, timeout))
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None

    async def _request(self, method: str, path: str, **kw: Any) -> Any:
        return _answer(await self._send(method, path, **kw), path)

    async def _session(self, method: str, key: object, suffix: str = "", **kw: Any) -> Any:
        return await self._request(method, _session_path(key, suffix), **kw)

    # -- tools -----------------------------------------------------------------------------------
    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, caller: str, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Run one tool as ``caller``; errors come back as ``{"error": {"code", "message"}}``."""
        args = dict(args or {})
        try:
            res = await self._send(
                "POST",
                f"/v1/tools/{_seg(name)}",
                body=args,
                headers=caller_headers(caller, agent_id),
                timeout=_tool_timeout(self.timeout, args),
            )
        except (StoreUnavailable, UnicodeEncodeError) as exc:
            return _tool_failure(exc)
        return _tool_answer(res)

    # -- sessions --------------------------------------------------------------------------------
    async def put_session(
        self,
        key: object,
        *,
        agent_id: object = None,
        kind: object = None,
        spawned_by: object = None,
        label: object = None,
        created_by: object = None,
    ) -> dict[str, Any]:
        return await self._session(
            "PUT",
            key,
            body=_drop_none(
                {"agentId": agent_id, "kind": kind, "spawnedBy": spawned_by, "label": label, "createdBy": created_by}
            ),
        )

    async def get_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return await self._session("GET", key, params={"agentId": agent_id})

    async def delete_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return await self._session("DELETE", key, params={"agentId": agent_id})

    async def reset_session(self, key: object, *, agent_id: object = None) -> dict[str, Any]:
        return await self._session("POST", key, "/reset", body=_drop_none({"agentId": agent_id}))

    # -- producers -------------------------------------------------------------------------------
    async def inbound(
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
        return await self._session(
            "POST",
            key,
            "/inbound",
            body=_drop_none(
                {
                    "text": text,
                    "channel": channel,
                    "provenance": provenance,
                    "sourceSessionKey": source_session_key,
                    "humanId": human_id,
                    "lane": lane,
                    "occurredAt": occurred_at,
                    "runId": run_id,
                    "agentId": agent_id,
                    "dedupeKey": dedupe_key,
                }
            ),
        )

    async def set_goal(
        self,
        key: object,
        action: object,
        *,
        objective: object = None,
        status: object = None,
        actor: object = None,
        agent_id: object = None,
    ) -> dict[str, Any]:
        return await self._session(
            "POST",
            key,
            "/goal",
            body=_drop_none(
                {"action": action, "objective": objective, "status": status, "actor": actor, "agentId": agent_id}
            ),
        )

    async def begin_run(self, key: object, run_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return await self._session("POST", key, "/runs", body=_drop_none({"runId": run_id, "agentId": agent_id}))

    async def end_run(self, key: object, run_id: object, status: object, *, agent_id: object = None) -> dict[str, Any]:
        return await self._session(
            "POST", key, f"/runs/{_seg(run_id)}/end", body=_drop_none({"status": status, "agentId": agent_id})
        )

    async def record_compaction(self, key: object, operation_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return await self._session(
            "POST", key, "/compactions", body=_drop_none({"operationId": operation_id, "agentId": agent_id})
        )

    async def report_lifecycle(
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
        """``Gateway.report_lifecycle`` over HTTP (see ``GatewayClient.report_lifecycle``)."""
        return await self._session(
            "POST", key, "/lifecycle", body=_lifecycle_body(state, agent_id, pid, host, machine, outcome, at)
        )

    async def append_message(
        self, key: object, role: object, text: object, *, agent_id: object = None, imported: bool = False
    ) -> dict[str, Any]:
        body = _drop_none({"role": role, "text": text, "agentId": agent_id})
        if imported:
            body["imported"] = True
        return await self._session("POST", key, "/messages", body=body)

    # -- queue and watches -----------------------------------------------------------------------
    async def enqueue_system_event(
        self, key: object, text: object, *, context_key: object = None, agent_id: object = None
    ) -> dict[str, Any]:
        return await self._session(
            "POST",
            key,
            "/system-events",
            body=_drop_none({"text": text, "contextKey": context_key, "agentId": agent_id}),
        )

    async def peek_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]:
        return (await self._session("GET", key, "/system-events", params={"agentId": agent_id}))["entries"]

    async def withheld_notices(self, key: object, *, agent_id: object = None, shown: Sized | None = None) -> int:
        """How many more watched sessions changed than the full queue holds notices for (see the sync client)."""
        if shown is not None and not len(shown):
            return 0
        body = await self._session("GET", key, "/system-events", params={"agentId": agent_id})
        return int(body.get("withheld") or 0)

    async def drain_system_events(self, key: object, *, agent_id: object = None) -> list[QueueEntry]:
        return (await self._session("POST", key, "/system-events/drain", body=_drop_none({"agentId": agent_id})))[
            "entries"
        ]

    async def ack_system_events(self, key: object, ids: Any, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries (ids from a peek) once you have them: ``{acknowledged: n}``."""
        return await self._session("POST", key, "/system-events/ack", body=_ack_body(ids, agent_id))

    async def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool:
        return (
            await self._request(
                "POST", "/v1/watch", body=_drop_none({"watcher": watcher, "target": target, "agentId": agent_id})
            )
        )["watched"]

    async def unwatch(self, watcher: object, target: object) -> bool:
        return (await self._request("POST", "/v1/unwatch", body={"watcher": watcher, "target": target}))["unwatched"]

    async def cursors(self, *, watcher: object = None, target: object = None) -> list[dict[str, Any]]:
        return (await self._request("GET", "/v1/cursors", params={"watcher": watcher, "target": target}))["cursors"]

    # -- reconciliation and the log --------------------------------------------------------------
    async def state_version(self, key: object, agent_id: object = None) -> int:
        return int((await self._session("GET", key, "/state-version", params={"agentId": agent_id}))["stateVersion"])

    async def events_after(self, after: object = 0, limit: object = 200) -> list[dict[str, Any]]:
        return (await self._request("GET", "/v1/events", params={"after": after, "limit": limit}))["events"]

    # -- maintenance -----------------------------------------------------------------------------
    async def prune(self, *, force: bool = True) -> PruneResult:
        return _prune_result(await self._request("POST", "/v1/prune", body={"force": force}))

    async def sweep(self) -> int:
        return int((await self._request("POST", "/v1/sweep", body={}))["swept"])

    async def health(self) -> dict[str, Any]:
        """``{status, ...}``; answers (never raises) while the gateway is starting."""
        return _health(await self._send("GET", "/v1/health"))

    # -- upstream --------------------------------------------------------------------------------
    async def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        return (await self._request("GET", f"/v1/catalogs/{_seg(catalog_id)}/threads"))["threads"]

    async def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = "gateway:local",
    ) -> dict[str, Any]:
        return await self._request(
            "POST",
            f"/v1/catalogs/{_seg(catalog_id)}/threads/{_seg(thread_id)}/continue",
            body=_drop_none({"sessionKey": session_key, "agentId": agent_id, "hostId": host_id}),
        )

    async def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        return (await self._session("GET", session_key, "/link", params={"agentId": agent_id}))["link"]

    async def upstream_tick(self) -> dict[str, Any]:
        return await self._request("POST", "/v1/upstream/tick", body={})

    async def nudge(self, session_key: object, agent_id: object = None, *, wait_ms: object = 0) -> dict[str, Any]:
        body = {"agentId": agent_id, "waitMs": wait_ms}
        timeout = _nudge_timeout(self.timeout, wait_ms)
        return await self._session("POST", session_key, "/nudge", body=body, timeout=timeout)

    async def answer_hook(
        self, session_key: object, host: str, payload: Mapping[str, Any], *, agent_id: object = None
    ) -> dict[str, Any]:
        """The gateway's answer to a host's hook input for the session ({} when nothing is pending)."""
        return await self._session(
            "POST", session_key, f"/hooks/{host}", body=dict(payload), params={"agentId": agent_id}
        )

    async def upstream_results(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/upstream/results")

    async def pair_node(self, node_id: str, url: str, token: str) -> dict[str, Any]:
        return await self._request("PUT", f"/v1/nodes/{_seg(node_id)}", body={"url": url, "token": token})

    # -- wakes -----------------------------------------------------------------------------------
    async def stream_wakes(self, key: str, *, timeout: float | None = None) -> AsyncIterator[dict[str, Any]]:
        """Async-iterate wake dicts as they arrive; ``timeout`` bounds the wait for the next line.

        Closing the iterator (``aclose()``, or leaving ``async for``) closes the connection.
        """
        read = httpx.Timeout(self.timeout, read=timeout)
        try:
            async with self._http.stream("GET", "/v1/stream", params={"sessionKey": key}, timeout=read) as res:
                if res.status_code >= 400:
                    await res.aread()
                    raise _stream_refused(res)
                parser = _WakeParser()
                async for line in res.aiter_lines():
                    wake = parser.feed(line)
                    if wake is not None:
                        yield wake
        except httpx.ReadTimeout:
            raise TimeoutError(f"no data from the wake stream within {timeout} s") from None
        except httpx.HTTPError as exc:
            raise StoreUnavailable(
                f"wake stream from {self.base_url} failed: {exc.__class__.__name__}: {exc}"
            ) from None

    # -- the log stream (sessionwatch.log_follow) -------------------------------------------------
    async def follow_log(
        self,
        after: int | None = None,
        *,
        session: str | None = None,
        agent: str | None = None,
        kinds: list[str] | None = None,
        reconnect: bool = True,
        timeout: float | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """``GatewayClient.follow_log`` as an async iterator."""
        async for item in log_follow.afollow(
            self._http,
            self.base_url,
            after,
            log_follow.params(session, agent, kinds),
            reconnect=reconnect,
            timeout=timeout,
        ):
            yield item
