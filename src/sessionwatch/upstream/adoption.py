"""Adoption ("continue"): link a catalog thread to a session with a baseline marker (docs/upstream.md,
"Adopting a thread").

Local Claude and Codex files: the ref is ``{filePath}``, the baseline ``{offset, file}`` just past the
last complete row (a row still being written is classified when it completes), with the file's identity;
a Codex baseline adds ``thread``, the context the rows before it set (who started the turn, a subagent's
thread or not), read from the file.
Paired nodes: the ref is ``{nodeId, threadId}``, the baseline ``{id}`` of the newest item (null for an
empty thread).

The same source keeps its scan progress (and restarts any miss streak); a different source rebases.
``adopted`` is recorded once per session key. When the upstream cannot be read for a baseline, the
continuation still succeeds, without a link: a link whose baseline would replay history is refused.
The result says (``watched``, ``note``) when no session watches the adopted one: the monitor scans only
watched sessions, so the link does nothing until one does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .. import kinds
from ..errors import InvalidArgument, NotFound
from ..keys import check_agent_id
from ..store.records import EventInput, Link, Node
from .catalogs import LocalCatalog, check_catalog, check_thread_id
from .jsonl_scan import baseline
from .links import LOCAL_HOST, link_json, parse_host
from .node_client import NodeClient, NodeError, ThreadNotFound

log = logging.getLogger("sessionwatch.upstream")


def default_session_key(agent: str, catalog: str, node_id: str | None, thread_id: str) -> str:
    return f"agent:{agent}:{catalog}:{node_id}:{thread_id}" if node_id else f"agent:{agent}:{catalog}:{thread_id}"


class Adopter:
    def __init__(
        self,
        gateway: Any,
        catalogs: dict[str, LocalCatalog],
        client_factory: Callable[[Node], NodeClient],
        rooms: dict[str, Any] | None = None,
    ) -> None:
        self.gw = gateway
        self.catalogs = catalogs
        self.client_factory = client_factory
        self.rooms: dict[str, Any] = rooms if rooms is not None else {}  # host rooms' catalogs (rooms.py)

    def continue_thread(
        self,
        catalog_id: object,
        thread_id: object,
        *,
        session_key: object = None,
        agent_id: object = None,
        host_id: object = LOCAL_HOST,
    ) -> dict[str, Any]:
        catalog = check_catalog(catalog_id)
        tid = check_thread_id(thread_id)
        node_id = parse_host(host_id)
        host = LOCAL_HOST if node_id is None else f"node:{node_id}"
        agent = check_agent_id(agent_id) if agent_id is not None else None
        if session_key is None:
            session_key = default_session_key(agent or "main", catalog, node_id, tid)
        key, agent = self.gw.resolve(session_key, agent)

        # Find the upstream and its baseline before writing anything.
        upstream: tuple[str, dict[str, Any], dict[str, Any]] | None
        reason: str | None = None
        if node_id is None:
            upstream, reason = self._local(catalog, tid)
        else:
            upstream, reason = self._node(catalog, node_id, tid)

        if self.gw.store.get_session(key, agent) is None:
            self.gw.put_session(key, agent_id=agent)
        if upstream is None:
            return {"sessionKey": key, "agentId": agent, "linked": False, "link": None, "reason": reason}
        kind, ref, marker = upstream
        now = self.gw.clock()
        link, status = self.gw.store.upsert_link(Link(key, agent, catalog, host, tid, kind, ref, marker, now, now), now)
        session = self.gw.store.get_session(key, agent)
        self.gw.record(
            EventInput(
                key,
                agent,
                kinds.ADOPTED,
                "human",
                kinds.adopted_summary(catalog),
                now,
                session_id=session.session_id if session else None,
                dedupe_key=f"adopted:{key}",
                payload={"catalogId": catalog, "hostId": host},
            )
        )
        out: dict[str, Any] = {
            "sessionKey": key,
            "agentId": agent,
            "linked": True,
            "link": link_json(link),
            "adoption": status,
        }
        watched = self._watched(key)
        if watched is not None:
            out["watched"] = watched
            if not watched:
                out["note"] = unwatched_note(key)
        return out

    def _watched(self, key: str) -> bool | None:
        """Whether some watch cursor targets the session (None when that cannot be read)."""
        try:
            return bool(self.gw.store.cursors(target=key))
        except Exception:
            log.exception("reading the watchers of %s failed", key)
            return None

    def _local(self, catalog: str, tid: str) -> tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]:
        if catalog in self.rooms:  # a host room's thread on this machine: the room makes the baseline
            return self.rooms[catalog].adopt(tid)
        cat = self.catalogs[catalog]
        try:
            found = cat.locate(tid)
        except OSError as exc:
            log.warning("listing %s threads failed: %s", catalog, exc)
            return None, f"listing the {catalog} catalog failed: {exc.strerror or exc}"
        if found is None:
            raise NotFound(f"no {catalog} thread {tid!r} under {cat.base}")
        try:
            marker = baseline(found.path, cat.rules)
        except OSError as exc:
            return None, f"cannot read {found.path} for a baseline: {exc.strerror or exc}"
        return (cat.upstream_kind, {"filePath": found.path}, marker), None

    def _node(
        self, catalog: str, node_id: str, tid: str
    ) -> tuple[tuple[str, dict[str, Any], dict[str, Any]] | None, str | None]:
        if catalog in self.rooms:
            raise NotFound(f"{catalog} threads are followed on their own machine only (no node serves them)")
        node = self.gw.store.get_node(node_id)
        if node is None:
            raise NotFound(f"node {node_id!r} is not paired (pair it first)")
        try:
            with self.client_factory(node) as client:
                page = client.items(catalog, tid, limit=1)
        except ThreadNotFound:
            raise NotFound(f"node {node_id!r} has no {catalog} thread {tid!r}") from None
        except NodeError as exc:
            return None, str(exc)
        items = page["items"]
        newest = items[0]["id"] if items else None
        kind = self.catalogs[catalog].upstream_kind
        return (kind, {"nodeId": node_id, "threadId": tid}, {"id": newest}), None


def unwatched_note(key: str) -> str:
    """Said when a thread is adopted onto a session nobody watches: such a link is never scanned."""
    return (
        f"Nobody watches {key} yet, and the monitor scans only watched sessions: a person typing into "
        f"this thread is noticed once a session watches it. Run: sessionwatch watch {key} --as <WATCHER>"
    )


def check_pairing(node_id: object, url: object, token: object) -> tuple[str, str, str]:
    from .links import check_node_id

    nid = check_node_id(node_id)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > 2048:
        raise InvalidArgument(f"url must be an http:// or https:// URL, got {url!r}")
    import httpx

    try:
        parsed = httpx.URL(url)
    except Exception:  # noqa: BLE001 - httpx raises several types for a malformed URL
        raise InvalidArgument(f"url {url!r} is not a valid URL") from None
    if not parsed.host:
        raise InvalidArgument(f"url {url!r} has no host")
    if not isinstance(token, str) or not token or len(token) > 4096 or any(c.isspace() or ord(c) < 32 for c in token):
        raise InvalidArgument("token must be a non-empty string without whitespace (at most 4096 characters)")
    return nid, url.rstrip("/"), token
