"""The gateway's client for a paired node (``sessionwatch node``): bearer token, JSON, short timeouts."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from ..store.records import Node


class NodeError(Exception):
    """Anything other than a definitive answer: unreachable, bad token, bad reply. Inconclusive."""


class NodeUnauthorized(NodeError):
    """The node refused the token (401/403): a configuration error, not an outage."""


class ThreadNotFound(NodeError):
    """The node says, definitively, that it has no such thread."""


class NodeClient:
    def __init__(self, node: Node, *, timeout: float = 10.0) -> None:
        self.node = node
        # trust_env=False: a proxy from the environment must not sit between the gateway and its nodes
        self._http = httpx.Client(
            base_url=node.url.rstrip("/"),
            timeout=timeout,
            trust_env=False,
            headers={"Authorization": f"Bearer {node.token}"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self._http.get(path, params={k: v for k, v in params.items() if v is not None})
        except httpx.HTTPError as exc:
            raise NodeError(f"node {self.node.node_id} unreachable: {exc}") from exc
        try:
            body = resp.json()
        except ValueError:
            body = None
        if (
            resp.status_code == 404
            and isinstance(body, dict)
            and isinstance(body.get("error"), dict)
            and body["error"].get("code") == "thread_not_found"
        ):
            raise ThreadNotFound(f"node {self.node.node_id}: thread not found")
        if resp.status_code in (401, 403):
            raise NodeUnauthorized(f"node {self.node.node_id} refused the token ({resp.status_code})")
        if resp.status_code != 200 or not isinstance(body, dict):
            raise NodeError(f"node {self.node.node_id} answered {resp.status_code}")
        return body

    def threads(self, catalog: str) -> list[dict[str, Any]]:
        body = self._get("/v1/node/threads", {"catalog": catalog})
        threads = body.get("threads")
        if not isinstance(threads, list):
            raise NodeError(f"node {self.node.node_id}: malformed thread list")
        return [t for t in threads if isinstance(t, dict) and isinstance(t.get("threadId"), str)]

    def items(self, catalog: str, thread_id: str, *, before: str | None = None, limit: int = 50) -> dict[str, Any]:
        path = f"/v1/node/threads/{quote(catalog, safe='')}/{quote(thread_id, safe='')}/items"
        body = self._get(path, {"before": before, "limit": limit})
        items = body.get("items")
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("id"), str) and i["id"] for i in items
        ):
            raise NodeError(f"node {self.node.node_id}: malformed items page")
        nb = body.get("nextBefore")
        return {"items": items, "nextBefore": nb if isinstance(nb, str) and nb else None}
