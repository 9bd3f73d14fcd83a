"""``UpstreamService``: catalogs, adoption links, paired nodes and the periodic monitor, per gateway.

The gateway creates it on first use (``gateway.upstream``) and delegates ``list_threads``,
``continue_thread``, ``link``, ``upstream_tick``, ``upstream_results`` and ``pair_node`` to it. Call
:meth:`start` to run the monitor on the gateway's timers: the first tick 15 s after start, then every
60 s (``Settings.monitor_first_tick_ms`` / ``monitor_interval_ms``). With an injected clock ticks run
only through ``gateway.run_due``, synchronously; on real timers each tick runs on its own thread so a
slow provider never holds up wake delivery.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from ..errors import InvalidArgument, NotFound, StoreUnavailable, Unauthorized
from ..hosts.registry import ROOMS
from ..store.records import Node
from .adoption import Adopter, check_pairing
from .catalogs import CATALOG_IDS, LocalCatalog, check_catalog
from .links import LOCAL_HOST, link_json, parse_host, thread_links
from .monitor import Monitor, Provider, skipped_entry
from .node_client import NodeClient, NodeError, NodeUnauthorized
from .providers import LocalFiles, NodeThreads
from .rooms import RoomCatalog, RoomSessions, rooms

log = logging.getLogger("sessionwatch.upstream")

# How long one tick keeps reading windows of local transcripts (per catalog): a prompt behind a large
# backlog is found in the first tick, well inside the 45 s provider timeout.
DEFAULT_SCAN_BUDGET_S = 5.0


class UpstreamService:
    def __init__(self, gateway: Any) -> None:
        self.gw = gateway
        self.catalogs: dict[str, LocalCatalog] = {c: LocalCatalog(c) for c in CATALOG_IDS}
        self.rooms: dict[str, RoomCatalog] = rooms()  # rooms that read their own sessions (OpenCode, Pi), local only
        self.node_timeout_s = 10.0
        self.listing_timeout_s = 5.0
        self.scan_budget_s = DEFAULT_SCAN_BUDGET_S
        self._background: bool | None = None
        self._tick_lock = threading.Lock()
        self._ticks = 0
        self._last: dict[str, Any] = {"tick": 0, "status": "never", "links": [], "providers": []}
        self._next_due: int | None = None
        self._registered = False
        self._runner: threading.Thread | None = None
        self.monitor = Monitor(gateway, self._provider_for)
        self.adopter = Adopter(gateway, self.catalogs, self._client, self.rooms)

    # -- configuration --------------------------------------------------------------------------
    def configure(
        self,
        *,
        node_timeout_s: float | None = None,
        background: bool | None = None,
        scan_budget_s: float | None = None,
        **places: str | os.PathLike[str] | None,
    ) -> None:
        """Override where a room's host keeps its sessions, by the room's place (``claude_root``, ``codex_root``,
        ``pi_root``, ``opencode_db``: ``hosts/<room>``'s ``Place``, which says the default), the per-request
        node timeout, whether timed ticks run on their own thread, and how long one tick may keep reading local
        transcript windows per catalog (``scan_budget_s``). Nothing changes when an argument is refused."""
        catalogs = {r.place.option: r.catalog for r in ROOMS.values() if r.place is not None}
        unknown = sorted(set(places) - set(catalogs))
        if unknown:
            raise TypeError(f"configure() got unexpected keyword arguments: {', '.join(unknown)}")
        if scan_budget_s is not None:
            if not 0 <= scan_budget_s <= 40:
                raise InvalidArgument("scan_budget_s must be between 0 and 40 seconds (the provider timeout is 45)")
            self.scan_budget_s = float(scan_budget_s)
        for option, place in places.items():
            catalog = catalogs[option]
            if place is None:
                continue
            if catalog in self.catalogs:  # transcript files: upstream reads them
                self.catalogs[catalog] = LocalCatalog(catalog, place)
            elif catalog in self.rooms:  # a room's own reader, over another place
                self.rooms[catalog] = self.rooms[catalog].at(place)
        self.adopter.catalogs = self.catalogs
        self.adopter.rooms = self.rooms
        if node_timeout_s is not None:
            self.node_timeout_s = float(node_timeout_s)
        if background is not None:
            self._background = background

    def _client(self, node: Node) -> NodeClient:
        return NodeClient(node, timeout=self.node_timeout_s)

    def _provider_for(self, catalog: str, host: str) -> Provider | None:
        if catalog in self.rooms:
            if host != LOCAL_HOST:
                return None
            s = self.gw.settings
            return RoomSessions(
                self.rooms[catalog], s.scan_window_bytes, min(self.scan_budget_s, s.provider_timeout_ms / 2000)
            )
        if catalog not in self.catalogs:
            return None
        if host == LOCAL_HOST:
            s = self.gw.settings
            # at most half the provider timeout, so a budgeted scan is never cut off by it
            budget = min(self.scan_budget_s, s.provider_timeout_ms / 2000)
            return LocalFiles(self.catalogs[catalog], s.scan_window_bytes, budget)
        if host.startswith("node:"):
            node = self.gw.store.get_node(host[5:])
            if node is None:
                return None
            s = self.gw.settings
            return NodeThreads(node, catalog, s.node_page_size, s.node_max_pages, self._client)
        return None

    # -- catalogs and links ---------------------------------------------------------------------
    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        """This machine's threads of the catalog, then each paired node's (unreachable nodes are left out).

        ``node:<nodeId>`` lists that node's threads of every catalog (an unreachable node is an error)."""
        if isinstance(catalog_id, str) and catalog_id.startswith("node:"):
            return self._node_threads(catalog_id)
        catalog = check_catalog(catalog_id)
        out: list[dict[str, Any]] = []
        if catalog in self.rooms:  # a host room's catalog: this machine's sessions only
            try:
                return [{**t, "hostId": LOCAL_HOST} for t in self.rooms[catalog].list_threads()]
            except Exception as exc:  # noqa: BLE001 - a database that cannot be read now lists nothing
                log.warning("listing local %s threads failed: %s", catalog, exc)
                return []
        try:
            for t in self.catalogs[catalog].list_threads():
                t["hostId"] = LOCAL_HOST
                out.append(t)
        except OSError as exc:
            log.warning("listing local %s threads failed: %s", catalog, exc)
        try:
            nodes = self.gw.store.nodes()
        except Exception:
            log.exception("listing paired nodes failed")
            nodes = []
        for node in nodes:
            try:
                with NodeClient(node, timeout=min(self.listing_timeout_s, self.node_timeout_s)) as client:
                    remote = client.threads(catalog)
            except NodeError as exc:
                log.info("node %s left out of the listing: %s", node.node_id, exc)
                continue
            for t in remote:
                t = dict(t)
                t.pop("filePath", None)
                t["catalogId"] = catalog
                t["hostId"] = f"node:{node.node_id}"
                out.append(t)
        return out

    def _node_threads(self, host_id: str) -> list[dict[str, Any]]:
        node_id = parse_host(host_id)
        node = self.gw.store.get_node(node_id) if node_id is not None else None
        if node is None:
            raise NotFound(f"node {host_id[5:]!r} is not paired")
        out: list[dict[str, Any]] = []
        with NodeClient(node, timeout=min(self.listing_timeout_s, self.node_timeout_s)) as client:
            for catalog in CATALOG_IDS:
                try:
                    remote = client.threads(catalog)
                except NodeError as exc:
                    raise StoreUnavailable(f"node {node.node_id} did not answer: {exc}") from None
                out.extend({**t, "catalogId": catalog, "hostId": host_id} for t in remote)
        return out

    def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = LOCAL_HOST,
    ) -> dict[str, Any]:
        return self.adopter.continue_thread(
            catalog_id, thread_id, session_key=session_key, agent_id=agent_id, host_id=host_id
        )

    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        key, agent = self.gw.resolve(session_key, agent_id)
        found = self.gw._safe(lambda: self.gw.store.get_link(key, agent), None)
        return None if found is None else link_json(found)

    def pair_node(self, node_id: str, url: str, token: str, *, verify: bool = True) -> dict[str, Any]:
        """Pair (or re-pair) a node. With ``verify`` the node is asked once with the token first, so a
        wrong token is ``unauthorized`` and an unreachable node ``unavailable`` now, not at a later tick;
        either way nothing is stored."""
        nid, base, tok = check_pairing(node_id, url, token)
        now = self.gw.clock()
        if verify:
            with NodeClient(Node(nid, base, tok, now, now), timeout=self.node_timeout_s) as client:
                try:
                    client.threads(CATALOG_IDS[0])  # any catalog a node serves: the token is what is asked
                except NodeUnauthorized as exc:
                    raise Unauthorized(f"{exc} at {base}; nothing was paired (check --token)") from None
                except NodeError as exc:
                    raise StoreUnavailable(
                        f"could not check the token with {base}: {exc}; nothing was paired"
                    ) from None
        existing = self.gw.store.get_node(nid)
        node = self.gw.store.put_node(Node(nid, base, tok, existing.created_at if existing else now, now))
        out = node.to_json()
        out["hostId"] = f"node:{nid}"
        return out

    # -- the monitor ----------------------------------------------------------------------------
    def tick(self) -> dict[str, Any]:
        """Run one monitor tick now and return its results (``status: busy`` if one is running)."""
        if not self._tick_lock.acquire(blocking=False):
            return self._busy("a tick is already running in this gateway")
        try:
            guard = self.gw.store.try_lock("upstream-monitor")
            if guard is None:  # another gateway sharing the store is ticking
                return self._busy("another gateway sharing the store is running a tick (it holds the lock)")
            with guard:
                result = self.monitor.tick()
            self._ticks += 1
            result["tick"] = self._ticks
            self._last = result
            return result
        finally:
            self._tick_lock.release()

    def thread_links(
        self, catalog_id: str, thread_id: str | None = None, file_path: str | None = None
    ) -> list[dict[str, Any]]:
        """The links of one catalog thread, newest first (see ``links.thread_links``)."""
        return thread_links(self.gw.store, check_catalog(catalog_id), thread_id, file_path)

    def nudge(self, session_key: str, agent_id: str | None = None, *, retry_ms: int = 0) -> dict[str, Any]:
        """Check one link now (a hook saw a prompt submitted in its thread), with the tick's own scan and
        dedupe. The host may not have written the prompt's row yet: while nothing was recorded, scan again
        a few times within ``retry_ms``. Needs no monitor lock: recordings dedupe by content and markers
        move only from the row a scan read, so a tick running at the same time records nothing twice."""
        key, agent = self.gw.resolve(session_key, agent_id)
        deadline = time.monotonic() + max(0, min(int(retry_ms), 10_000)) / 1000
        pause = 0.05
        attempts = 0
        while True:
            attempts += 1
            # its own Monitor: a nudge never resets the abort flag of a tick running in this process
            result = Monitor(self.gw, self._provider_for).tick(only=(key, agent))
            entry = result["links"][0] if result["links"] else {"status": "skipped", "reason": "no link"}
            done = entry.get("status") not in ("unchanged", "advanced")
            if done or time.monotonic() + pause > deadline:
                return {"sessionKey": key, "agentId": agent, "attempts": attempts, **entry}
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _busy(self, reason: str) -> dict[str, Any]:
        """A tick that could not run still says which links it left, and why."""
        out: dict[str, Any] = {"tick": self._ticks, "status": "busy", "reason": reason, "links": [], "providers": []}
        try:
            out["links"] = [skipped_entry(x, reason) for x in self.gw.store.links()]
        except Exception:
            log.exception("listing links failed")
        return out

    def last_results(self) -> dict[str, Any]:
        return self._last

    def start(self) -> None:
        """Tick on the gateway's timers: first after ``monitor_first_tick_ms``, then every interval."""
        self._next_due = self.gw.clock() + self.gw.settings.monitor_first_tick_ms
        if not self._registered:
            self._registered = True
            self.gw.add_periodic(self)
        else:
            self.gw._timer_event.set()

    def stop(self) -> None:
        """No more timed ticks; an in-flight tick publishes nothing more."""
        self._next_due = None
        self.monitor.abort()

    @property
    def running(self) -> bool:
        return self._next_due is not None

    # Periodic (driven by Gateway.run_due)
    def due_at(self) -> int | None:
        return self._next_due

    def run_due(self, now: int) -> None:
        if self._next_due is None or now < self._next_due:
            return
        self._next_due = now + self.gw.settings.monitor_interval_ms
        background = self._background if self._background is not None else not self.gw._injected_clock
        if not background:
            self.tick()
            return
        if self._runner is not None and self._runner.is_alive():
            return  # single-flight: the previous tick is still running
        self._runner = threading.Thread(target=self._tick_quietly, name="sessionwatch-upstream-tick", daemon=True)
        self._runner.start()

    def _tick_quietly(self) -> None:
        try:
            self.tick()
        except Exception:
            log.exception("upstream tick failed")
