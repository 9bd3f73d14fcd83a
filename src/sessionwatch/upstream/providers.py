"""Providers: scan a batch of probes of one catalog on one host. One probe's failure never touches
another's; the monitor bounds the whole batch by the provider timeout."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..hosts.transcripts.verdict import is_external, parse_timestamp
from ..store.records import Node
from .catalogs import LocalCatalog
from .jsonl_scan import scan_file
from .node_client import NodeClient, NodeError, ThreadNotFound
from .node_items import verdict_from_item
from .probes import ACTIVITY, Outcome, Probe, missing

log = logging.getLogger("sessionwatch.upstream")


class LocalFiles:
    """Claude or Codex transcripts on the gateway host: byte-offset markers.

    One scan (every probe of the batch) reads windows for at most ``budget_s`` seconds; each file gets
    at least one window, so every link progresses however large another's backlog is."""

    def __init__(self, catalog: LocalCatalog, window: int, budget_s: float = 0.0) -> None:
        self.catalog = catalog
        self.window = window
        self.budget_s = budget_s

    def scan(self, probes: list[Probe]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        deadline = time.monotonic() + self.budget_s
        for probe in probes:
            path = probe.link.upstream_ref.get("filePath")
            try:
                out.append(
                    scan_file(path, probe.link.marker, self.catalog.rules, probe, self.window, deadline)
                    if isinstance(path, str)
                    else None
                )
            except Exception:
                log.exception("scanning %s for %s failed", path, probe.link.session_key)
                out.append(None)
        return out


class NodeThreads:
    """Threads on a paired node: item-id markers, paging back until the marker is found (bounded)."""

    def __init__(
        self, node: Node, catalog_id: str, page_size: int, max_pages: int, client_factory: Callable[[Node], NodeClient]
    ) -> None:
        self.node = node
        self.catalog_id = catalog_id
        self.page_size = page_size
        self.max_pages = max_pages
        self.client_factory = client_factory

    def scan(self, probes: list[Probe]) -> list[Outcome | None]:
        out: list[Outcome | None] = []
        with self.client_factory(self.node) as client:
            for probe in probes:
                try:
                    out.append(self._one(client, probe))
                except ThreadNotFound:
                    out.append(missing("thread not found on node"))
                except NodeError as exc:
                    log.info("node scan of %s inconclusive: %s", probe.link.session_key, exc)
                    out.append(None)
                except Exception:
                    log.exception("node scan of %s failed", probe.link.session_key)
                    out.append(None)
        return out

    def _one(self, client: NodeClient, probe: Probe) -> Outcome | None:
        link = probe.link
        marker = link.marker.get("id")
        new: list[dict] = []
        found = False
        before: str | None = None
        for _ in range(self.max_pages):
            page = client.items(self.catalog_id, link.thread_id, before=before, limit=self.page_size)
            for item in page["items"]:
                if marker is not None and item["id"] == marker:
                    found = True
                    break
                new.append(item)
            before = page["nextBefore"]
            if found or before is None:
                break
        if not new:
            return None
        turns = 0
        latest: int | None = None
        for item in new:
            v = verdict_from_item(item)
            if v.human and is_external(v, probe.own()):
                turns += 1
                ts = parse_timestamp(v.timestamp)
                if ts is not None and (latest is None or ts > latest):
                    latest = ts
        newest = new[0]["id"]
        note = None if found or marker is None else "marker not found; everything fetched counts as new"
        outcome = Outcome(ACTIVITY, human_turns=turns, next_marker={"id": newest}, note=note)
        if turns:
            outcome.occurred_at = latest
            outcome.dedupe_id = newest
        return outcome
