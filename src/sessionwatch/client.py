"""``GatewayClient``: the Gateway's Python API over HTTP, for processes that talk to ``sessionwatch serve``.

Methods take the same arguments and return the same values as :class:`sessionwatch.Gateway`. Host
operations raise the matching :class:`SessionwatchError` subclass on an error response; ``call_tool``
returns the error object, like ``Gateway.call_tool``.

    with GatewayClient("http://127.0.0.1:7878", token=None) as gw:
        gw.put_session("agent:main:main")
        gw.call_tool("session_status", {}, caller="agent:main:main")
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from .errors import SessionwatchError, StoreUnavailable, error_from_json
from .store.records import PruneResult


def _seg(value: object) -> str:
    """One path segment; ':' stays readable, '/' and everything else unsafe is percent-encoded."""
    return quote(str(value), safe=":@")


def _drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


class GatewayClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    # -- plumbing --------------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, *, body: Mapping[str, Any] | None = None,
              params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
              timeout: float | None = None) -> httpx.Response:
        try:
            return self._http.request(method, path, json=None if body is None else dict(body),
                                      params=_drop_none(params or {}) or None, headers=headers,
                                      timeout=self.timeout if timeout is None else timeout)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"gateway at {self.base_url} unreachable: {exc.__class__.__name__}: {exc}") \
                from None

    @staticmethod
    def _decode(res: httpx.Response) -> Any:
        try:
            return res.json()
        except ValueError:
            return None

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        res = self._send(method, path, **kw)
        data = self._decode(res)
        if res.status_code >= 400:
            if isinstance(data, dict) and isinstance(data.get("error"), dict):
                raise error_from_json(data)
            raise (StoreUnavailable if res.status_code >= 500 else SessionwatchError)(
                f"HTTP {res.status_code} from {path}: {res.text[:200]}")
        return data

    def _session(self, method: str, key: object, suffix: str = "", **kw: Any) -> Any:
        return self._request(method, f"/v1/sessions/{_seg(key)}{suffix}", **kw)

    # -- tools -----------------------------------------------------------------------------------
    def call_tool(self, name: str, args: Mapping[str, Any] | None = None, *, caller: str,
                  agent_id: str | None = None) -> dict[str, Any]:
        """Run one tool as ``caller``; errors come back as ``{"error": {"code", "message"}}``."""
        headers = {"X-Session-Key": caller}
        if agent_id is not None:
            headers["X-Agent-Id"] = agent_id
        args = dict(args or {})
        wait = args.get("timeoutSeconds")
        timeout = self.timeout
        if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0:
            timeout = max(self.timeout, float(wait) + 10)
        try:
            res = self._send("POST", f"/v1/tools/{_seg(name)}", body=args, headers=headers, timeout=timeout)
        except (StoreUnavailable, UnicodeEncodeError) as exc:
            return {"error": {"code": "unavailable" if isinstance(exc, StoreUnavailable) else "invalid_argument",
                              "message": str(exc)}}
        data = self._decode(res)
        if isinstance(data, dict):
            return data
        return {"error": {"code": "unavailable", "message": f"HTTP {res.status_code}: {res.text[:200]}"}}

    # -- sessions --------------------------------------------------------------------------------
    def put_session(self, key: object, *, agent_id: object = None, kind: object = None, spawned_by: object = None,
                    label: object = None, created_by: object = None) -> dict[str, Any]:
        return self._session("PUT", key, body=_drop_none({"agentId": agent_id, "kind": kind, "spawnedBy": spawned_by,
                                                          "label": label, "createdBy": created_by}))

    def get_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return self._session("GET", key, params={"agentId": agent_id})

    def delete_session(self, key: object, agent_id: object = None) -> dict[str, Any]:
        return self._session("DELETE", key, params={"agentId": agent_id})

    def reset_session(self, key: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/reset", body=_drop_none({"agentId": agent_id}))

    # -- producers -------------------------------------------------------------------------------
    def inbound(self, key: object, text: object, *, channel: object, provenance: object = None,
                source_session_key: object = None, human_id: object = None, lane: object = None,
                occurred_at: object = None, run_id: object = None, agent_id: object = None,
                dedupe_key: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/inbound", body=_drop_none({
            "text": text, "channel": channel, "provenance": provenance, "sourceSessionKey": source_session_key,
            "humanId": human_id, "lane": lane, "occurredAt": occurred_at, "runId": run_id, "agentId": agent_id,
            "dedupeKey": dedupe_key}))

    def set_goal(self, key: object, action: object, *, objective: object = None, status: object = None,
                 actor: object = None, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/goal", body=_drop_none({
            "action": action, "objective": objective, "status": status, "actor": actor, "agentId": agent_id}))

    def begin_run(self, key: object, run_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/runs", body=_drop_none({"runId": run_id, "agentId": agent_id}))

    def end_run(self, key: object, run_id: object, status: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, f"/runs/{_seg(run_id)}/end",
                             body=_drop_none({"status": status, "agentId": agent_id}))

    def record_compaction(self, key: object, operation_id: object, *, agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/compactions",
                             body=_drop_none({"operationId": operation_id, "agentId": agent_id}))

    def append_message(self, key: object, role: object, text: object, *, agent_id: object = None,
                       imported: bool = False) -> dict[str, Any]:
        body = _drop_none({"role": role, "text": text, "agentId": agent_id})
        if imported:
            body["imported"] = True
        return self._session("POST", key, "/messages", body=body)

    # -- queue and watches -----------------------------------------------------------------------
    def enqueue_system_event(self, key: object, text: object, *, context_key: object = None,
                             agent_id: object = None) -> dict[str, Any]:
        return self._session("POST", key, "/system-events",
                             body=_drop_none({"text": text, "contextKey": context_key, "agentId": agent_id}))

    def peek_system_events(self, key: object, *, agent_id: object = None) -> list[dict[str, Any]]:
        return self._session("GET", key, "/system-events", params={"agentId": agent_id})["entries"]

    def drain_system_events(self, key: object, *, agent_id: object = None) -> list[dict[str, Any]]:
        return self._session("POST", key, "/system-events/drain", body=_drop_none({"agentId": agent_id}))["entries"]

    def ack_system_events(self, key: object, ids: Any, *, agent_id: object = None) -> dict[str, Any]:
        """Acknowledge entries (ids from a peek) once you have them: ``{acknowledged: n}``."""
        return self._session("POST", key, "/system-events/ack",
                             body=_drop_none({"ids": list(ids) if isinstance(ids, (list, tuple)) else ids,
                                              "agentId": agent_id}))

    def watch(self, watcher: object, target: object, *, agent_id: object = None) -> bool:
        return self._request("POST", "/v1/watch", body=_drop_none(
            {"watcher": watcher, "target": target, "agentId": agent_id}))["watched"]

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
        data = self._request("POST", "/v1/prune", body={"force": force})
        return PruneResult(rows_deleted=data["rowsDeleted"], cursors_deleted=data["cursorsDeleted"],
                           heads_stamped=data["headsStamped"], skipped=data["skipped"])

    def sweep(self) -> int:
        return int(self._request("POST", "/v1/sweep", body={})["swept"])

    def health(self) -> dict[str, Any]:
        """``{status, ...}``; answers (never raises) while the gateway is starting."""
        res = self._send("GET", "/v1/health")
        data = self._decode(res)
        return data if isinstance(data, dict) else {"status": "unknown", "httpStatus": res.status_code}

    # -- upstream --------------------------------------------------------------------------------
    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        return self._request("GET", f"/v1/catalogs/{_seg(catalog_id)}/threads")["threads"]

    def continue_thread(self, catalog_id: str, thread_id: str, *, session_key: str | None = None,
                        agent_id: str | None = None, host_id: str = "gateway:local") -> dict[str, Any]:
        return self._request("POST", f"/v1/catalogs/{_seg(catalog_id)}/threads/{_seg(thread_id)}/continue",
                             body=_drop_none({"sessionKey": session_key, "agentId": agent_id, "hostId": host_id}))

    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        return self._session("GET", session_key, "/link", params={"agentId": agent_id})["link"]

    def upstream_tick(self) -> dict[str, Any]:
        return self._request("POST", "/v1/upstream/tick", body={})

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
                    data = self._decode(res)
                    raise error_from_json(data) if isinstance(data, dict) else StoreUnavailable(
                        f"HTTP {res.status_code} from /v1/stream")
                event, data_lines = "message", []
                for line in res.iter_lines():
                    if line == "":
                        if event == "wake" and data_lines:
                            yield json.loads("\n".join(data_lines))
                        event, data_lines = "message", []
                    elif line.startswith(":"):
                        continue
                    else:
                        field, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if field == "event":
                            event = value
                        elif field == "data":
                            data_lines.append(value)
        except httpx.ReadTimeout:
            raise TimeoutError(f"no data from the wake stream within {timeout} s") from None
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"wake stream from {self.base_url} failed: {exc.__class__.__name__}: {exc}") \
                from None
