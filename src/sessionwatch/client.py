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
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

from . import client_ops as ops, log_follow
from .errors import InvalidArgument, SessionwatchError, StoreUnavailable, StoreUnreachable, error_from_json
from .headers import encode_header_value


def _drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def caller_headers(caller: str, agent_id: str | None) -> dict[str, str]:
    """The headers naming the calling session of a tool call (the one place they are built)."""
    # Percent-encoded UTF-8 (sessionwatch.headers), so any valid key can call a tool.
    headers = {"X-Session-Key": encode_header_value(str(caller))}
    if agent_id is not None:
        headers["X-Agent-Id"] = encode_header_value(str(agent_id))
    return headers


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


def _health(res: httpx.Response) -> dict[str, Any]:
    data = _decode(res)
    return data if isinstance(data, dict) else {"status": "unknown", "httpStatus": res.status_code}


def _stream_refused(res: httpx.Response) -> SessionwatchError:
    data = _decode(res)
    return (
        error_from_json(data) if isinstance(data, dict) else StoreUnavailable(f"HTTP {res.status_code} from /v1/stream")
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

    # -- tools -----------------------------------------------------------------------------------
    def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, caller: str, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Run one tool as ``caller``; errors come back as ``{"error": {"code", "message"}}``."""
        args = dict(args or {})
        try:
            res = self._send(
                "POST",
                f"/v1/tools/{ops.segment(name)}",
                body=args,
                headers=caller_headers(caller, agent_id),
                timeout=_tool_timeout(self.timeout, args),
            )
        except (StoreUnavailable, UnicodeEncodeError) as exc:
            return _tool_failure(exc)
        return _tool_answer(res)

    def health(self) -> dict[str, Any]:
        """``{status, ...}``; answers (never raises) while the gateway is starting."""
        return _health(self._send("GET", "/v1/health"))

    # -- the declared operations (client_ops.py): one request and its answer each --------------
    put_session = ops.sync(ops.Operations.put_session)
    get_session = ops.sync(ops.Operations.get_session)
    delete_session = ops.sync(ops.Operations.delete_session)
    reset_session = ops.sync(ops.Operations.reset_session)
    inbound = ops.sync(ops.Operations.inbound)
    set_goal = ops.sync(ops.Operations.set_goal)
    begin_run = ops.sync(ops.Operations.begin_run)
    end_run = ops.sync(ops.Operations.end_run)
    record_compaction = ops.sync(ops.Operations.record_compaction)
    report_lifecycle = ops.sync(ops.Operations.report_lifecycle)
    report_host_gone = ops.sync(ops.Operations.report_host_gone)
    append_message = ops.sync(ops.Operations.append_message)
    enqueue_system_event = ops.sync(ops.Operations.enqueue_system_event)
    peek_system_events = ops.sync(ops.Operations.peek_system_events)
    withheld_notices = ops.sync(ops.Operations.withheld_notices)
    drain_system_events = ops.sync(ops.Operations.drain_system_events)
    ack_system_events = ops.sync(ops.Operations.ack_system_events)
    watch = ops.sync(ops.Operations.watch)
    unwatch = ops.sync(ops.Operations.unwatch)
    cursors = ops.sync(ops.Operations.cursors)
    state_version = ops.sync(ops.Operations.state_version)
    events_after = ops.sync(ops.Operations.events_after)
    prune = ops.sync(ops.Operations.prune)
    sweep = ops.sync(ops.Operations.sweep)
    list_threads = ops.sync(ops.Operations.list_threads)
    continue_thread = ops.sync(ops.Operations.continue_thread)
    link = ops.sync(ops.Operations.link)
    upstream_tick = ops.sync(ops.Operations.upstream_tick)
    nudge = ops.sync(ops.Operations.nudge)
    answer_hook = ops.sync(ops.Operations.answer_hook)
    hooks_handed_out = ops.sync(ops.Operations.hooks_handed_out)
    upstream_results = ops.sync(ops.Operations.upstream_results)
    pair_node = ops.sync(ops.Operations.pair_node)

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

    # -- tools -----------------------------------------------------------------------------------
    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, caller: str, agent_id: str | None = None
    ) -> dict[str, Any]:
        """Run one tool as ``caller``; errors come back as ``{"error": {"code", "message"}}``."""
        args = dict(args or {})
        try:
            res = await self._send(
                "POST",
                f"/v1/tools/{ops.segment(name)}",
                body=args,
                headers=caller_headers(caller, agent_id),
                timeout=_tool_timeout(self.timeout, args),
            )
        except (StoreUnavailable, UnicodeEncodeError) as exc:
            return _tool_failure(exc)
        return _tool_answer(res)

    async def health(self) -> dict[str, Any]:
        """``{status, ...}``; answers (never raises) while the gateway is starting."""
        return _health(await self._send("GET", "/v1/health"))

    # -- the declared operations (client_ops.py): one request and its answer each --------------
    put_session = ops.asynchronous(ops.Operations.put_session)
    get_session = ops.asynchronous(ops.Operations.get_session)
    delete_session = ops.asynchronous(ops.Operations.delete_session)
    reset_session = ops.asynchronous(ops.Operations.reset_session)
    inbound = ops.asynchronous(ops.Operations.inbound)
    set_goal = ops.asynchronous(ops.Operations.set_goal)
    begin_run = ops.asynchronous(ops.Operations.begin_run)
    end_run = ops.asynchronous(ops.Operations.end_run)
    record_compaction = ops.asynchronous(ops.Operations.record_compaction)
    report_lifecycle = ops.asynchronous(ops.Operations.report_lifecycle)
    report_host_gone = ops.asynchronous(ops.Operations.report_host_gone)
    append_message = ops.asynchronous(ops.Operations.append_message)
    enqueue_system_event = ops.asynchronous(ops.Operations.enqueue_system_event)
    peek_system_events = ops.asynchronous(ops.Operations.peek_system_events)
    withheld_notices = ops.asynchronous(ops.Operations.withheld_notices)
    drain_system_events = ops.asynchronous(ops.Operations.drain_system_events)
    ack_system_events = ops.asynchronous(ops.Operations.ack_system_events)
    watch = ops.asynchronous(ops.Operations.watch)
    unwatch = ops.asynchronous(ops.Operations.unwatch)
    cursors = ops.asynchronous(ops.Operations.cursors)
    state_version = ops.asynchronous(ops.Operations.state_version)
    events_after = ops.asynchronous(ops.Operations.events_after)
    prune = ops.asynchronous(ops.Operations.prune)
    sweep = ops.asynchronous(ops.Operations.sweep)
    list_threads = ops.asynchronous(ops.Operations.list_threads)
    continue_thread = ops.asynchronous(ops.Operations.continue_thread)
    link = ops.asynchronous(ops.Operations.link)
    upstream_tick = ops.asynchronous(ops.Operations.upstream_tick)
    nudge = ops.asynchronous(ops.Operations.nudge)
    answer_hook = ops.asynchronous(ops.Operations.answer_hook)
    hooks_handed_out = ops.asynchronous(ops.Operations.hooks_handed_out)
    upstream_results = ops.asynchronous(ops.Operations.upstream_results)
    pair_node = ops.asynchronous(ops.Operations.pair_node)

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


ops.covers(GatewayClient)
ops.covers(AsyncGatewayClient)
