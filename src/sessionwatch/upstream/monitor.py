"""The upstream monitor: one tick over every watched link (docs/upstream.md, "The monitor", with a
persisted miss streak).

A tick lists the links whose session someone watches, skips ambiguous ones (a key linked under more
than one agent) and sessions that are missing or busy (an active run may still be writing upstream),
groups the rest by (catalog, host) and runs each group's provider with a timeout. Every outcome is
applied only after re-reading the link and the session: a Continue, a reset, a new run or a new own
prompt during the scan means the result is dropped (the next tick sees the truth). Markers move only
after the recording succeeded or was deduplicated, so nothing is lost to a failed write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from functools import partial
from typing import Any, Protocol

from .. import kinds
from ..hosts.transcripts.verdict import OwnTexts
from ..store.records import EventInput, Link, SessionRow
from .links import expected, link_source_key
from .probes import MISSING, Outcome, Probe

log = logging.getLogger("sessionwatch.upstream")


class Provider(Protocol):
    def scan(self, probes: list[Probe]) -> list[Outcome | None]: ...


ProviderFor = Callable[[str, str], Provider | None]  # (catalog id, host id) -> provider


def not_watched(key: str) -> str:
    return (
        f"not watched: the monitor scans only sessions that some session watches "
        f"(sessionwatch watch {key} --as <WATCHER>)"
    )


def link_entry(link: Link) -> dict[str, Any]:
    return {
        "sessionKey": link.session_key,
        "agentId": link.agent_id,
        "catalogId": link.catalog_id,
        "hostId": link.host_id,
        "threadId": link.thread_id,
    }


def skipped_entry(link: Link, reason: str) -> dict[str, Any]:
    return {**link_entry(link), "status": "skipped", "reason": reason}


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 - 1


class Monitor:
    def __init__(self, gateway: Any, provider_for: ProviderFor) -> None:
        self.gw = gateway
        self.provider_for = provider_for
        self.aborted = threading.Event()  # the current tick's; each tick starts with a fresh one

    def abort(self) -> None:
        """The tick in flight (if any) publishes nothing more."""
        self.aborted.set()

    @property
    def store(self) -> Any:
        return self.gw.store  # read each time: a gateway may wrap its store later (metrics, traces)

    @property
    def settings(self) -> Any:
        return self.gw.settings

    # -- the tick --------------------------------------------------------------------------------
    def tick(self, only: tuple[str, str] | None = None) -> dict[str, Any]:
        """Check every watched link once; ``only`` (session key, agent id): just that link, through the
        very same scan, checks and dedupe (a hook's nudge), so the regular tick never records it twice."""
        begun = time.perf_counter()
        result = self._tick(only)
        observer = getattr(self.gw, "observer", None)  # metrics: ticks, durations and outcomes by provider
        if observer is not None:
            observer.monitor_tick(result, time.perf_counter() - begun)
        return result

    def _tick(self, only: tuple[str, str] | None = None) -> dict[str, Any]:
        self.aborted = threading.Event()
        started = self.gw.clock()
        result: dict[str, Any] = {"status": "ok", "startedAt": started, "links": [], "providers": []}
        try:
            links = self.store.watched_links()
            every = self.store.links()
            if only is not None:
                links = [x for x in links if (x.session_key, x.agent_id) == only]
                every = [x for x in every if (x.session_key, x.agent_id) == only]
            watched = {(x.session_key, x.agent_id) for x in links}
            unwatched = [x for x in every if (x.session_key, x.agent_id) not in watched]
        except Exception:
            log.exception("listing watched links failed")
            result["status"] = "error"
            result["finishedAt"] = self.gw.clock()
            return result
        agents: dict[str, set[str]] = {}
        for link in links:
            agents.setdefault(link.session_key, set()).add(link.agent_id)
        groups: dict[tuple[str, str], list[tuple[Probe, dict[str, Any]]]] = {}
        for link in links:
            entry = link_entry(link)
            result["links"].append(entry)
            if len(agents[link.session_key]) > 1:
                entry.update(status="skipped", reason="session key linked under several agents")
                continue
            try:
                session = self.store.get_session(link.session_key, link.agent_id)
            except Exception:
                log.exception("loading session %s failed", link.session_key)
                entry.update(status="skipped", reason="session unreadable")
                continue
            if session is None or not session.session_id:
                entry.update(status="skipped", reason="no session")
                continue
            if session.active_run_id:
                entry.update(status="deferred", reason="active run")
                continue
            key, agent = link.session_key, link.agent_id
            probe = Probe(link, session.session_id, link_source_key(link), partial(self.gw.own_user_texts, key, agent))
            groups.setdefault((link.catalog_id, link.host_id), []).append((probe, entry))
        # Every link is reported, the ones no watch cursor targets too (they are never scanned).
        result["links"].extend(skipped_entry(x, not_watched(x.session_key)) for x in unwatched)
        self._run_groups(groups, result)
        if self.aborted.is_set():
            result["status"] = "aborted"
        result["finishedAt"] = self.gw.clock()
        return result

    def _run_groups(
        self, groups: dict[tuple[str, str], list[tuple[Probe, dict[str, Any]]]], result: dict[str, Any]
    ) -> None:
        if not groups:
            return
        timeout_s = self.settings.provider_timeout_ms / 1000
        pool = ThreadPoolExecutor(max_workers=min(8, len(groups)), thread_name_prefix="sessionwatch-upstream")
        try:
            pending: list[tuple[tuple[str, str], Future[list[Outcome | None]] | None, float, dict[str, Any]]] = []
            for (catalog, host), members in groups.items():
                info: dict[str, Any] = {"catalogId": catalog, "hostId": host, "probes": len(members)}
                result["providers"].append(info)
                provider = self._provider(catalog, host)
                if provider is None:
                    info["status"] = "unavailable"
                    for _, entry in members:
                        entry.update(status="skipped", reason="no provider for this catalog and host")
                    pending.append(((catalog, host), None, 0.0, info))
                    continue
                submitted = pool.submit(provider.scan, [p for p, _ in members])
                pending.append(((catalog, host), submitted, time.monotonic() + timeout_s, info))
            for group, fut, deadline, info in pending:
                if fut is None:
                    continue
                members = groups[group]
                begun = time.monotonic()
                try:
                    outcomes = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeout:
                    info["status"] = "timeout"
                    for _, entry in members:
                        entry.update(status="skipped", reason="provider timed out")
                    continue
                except Exception as exc:
                    log.exception("provider %s@%s failed", *group)
                    info.update(status="error", error=str(exc)[:200])
                    for _, entry in members:
                        entry.update(status="skipped", reason="provider failed")
                    continue
                info["status"] = "ok"
                info["waitedMs"] = int((time.monotonic() - begun) * 1000)
                # one outcome per probe; a short answer leaves the rest unscanned rather than failing the tick
                for (probe, entry), outcome in zip(members, outcomes, strict=False):
                    if self.aborted.is_set():
                        entry.update(status="aborted", reason="the monitor was stopped during the tick")
                        continue
                    try:
                        self._apply(probe, outcome, entry)
                    except Exception:
                        log.exception("applying the upstream outcome of %s failed", probe.link.session_key)
                        entry.update(status="error", reason="applying the outcome failed (see the log)")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # a timed-out scan finishes on its own, unheard

    def _provider(self, catalog: str, host: str) -> Provider | None:
        try:
            return self.provider_for(catalog, host)
        except Exception:
            log.exception("no provider for %s@%s", catalog, host)
            return None

    # -- applying outcomes ------------------------------------------------------------------------
    def _current(self, probe: Probe) -> Link | None:
        """The link now, if it is still the one that was scanned (same updated_at and source)."""
        link = self.store.get_link(probe.link.session_key, probe.link.agent_id)
        if link is None or link.updated_at != probe.link.updated_at or link_source_key(link) != probe.source_key:
            return None
        return link

    def _apply(self, probe: Probe, outcome: Outcome | None, entry: dict[str, Any]) -> None:
        link = probe.link
        if (outcome is None or outcome.kind != MISSING) and link.miss_count:
            # any non-missing result breaks the streak
            self.store.set_link_misses(link.session_key, link.agent_id, link.updated_at, 0)
        if outcome is None:
            entry["status"] = "unchanged"
            return
        if outcome.note:
            entry["note"] = outcome.note
        if outcome.kind == MISSING:
            self._missing(probe, entry)
        else:
            self._activity(probe, outcome, entry)

    def _session_same(self, probe: Probe) -> tuple[SessionRow | None, str | None]:
        session = self.store.get_session(probe.link.session_key, probe.link.agent_id)
        if session is None or session.session_id != probe.session_id:
            return None, "session changed"
        if session.active_run_id:
            return None, "active run"
        return session, None

    def _missing(self, probe: Probe, entry: dict[str, Any]) -> None:
        link = self._current(probe)
        if link is None:
            entry.update(status="changed", reason="link changed during the scan")
            return
        key, agent = link.session_key, link.agent_id
        session, why = self._session_same(probe)
        if session is None:
            if why == "session changed":
                self.store.set_link_misses(key, agent, link.updated_at, 0)
            entry.update(status="deferred", reason=why)
            return
        threshold = self.settings.missing_threshold
        previous = link.miss_count if link.miss_link_updated_at == link.updated_at else 0
        count = min(previous + 1, threshold)
        self.store.set_link_misses(key, agent, link.updated_at, count)
        entry.update(status="missing", missCount=count)
        if count < threshold:
            return
        sk = probe.source_key
        rec = self.gw.record(
            EventInput(
                key,
                agent,
                kinds.UPSTREAM_MISSING,
                "system",
                kinds.upstream_missing_summary(link.catalog_id),
                self.gw.clock(),
                session_id=session.session_id,
                dedupe_key=f"upstream-missing:{key}:{sk}:{link.updated_at}",
                payload={"channel": link.catalog_id},
                watchers=(session.spawned_by,) if session.spawned_by else (),
                only_if_watched=not session.spawned_by,
                expected_link=expected(link),
            )
        )
        if rec is not None and rec.event is not None:
            self.store.delete_link(key, agent, expected_updated_at=link.updated_at)
            entry.update(status="removed", recorded=rec.inserted, sequence=rec.event.sequence)
        else:
            self.store.set_link_misses(key, agent, link.updated_at, threshold - 1)  # the next miss retries
            entry.update(recordFailed=True)

    def _activity(self, probe: Probe, outcome: Outcome, entry: dict[str, Any]) -> None:
        turns = outcome.human_turns
        if not _is_count(turns) or not isinstance(outcome.next_marker, dict):
            entry.update(status="invalid", reason="the provider returned an unusable outcome")
            return
        session, why = self._session_same(probe)
        if session is None:
            entry.update(status="deferred", reason=why)
            return
        key, agent = probe.link.session_key, probe.link.agent_id
        if probe.own_loaded is not None and OwnTexts(self.gw.own_user_texts(key, agent)) != probe.own_loaded:
            entry.update(status="deferred", reason="own texts changed during the scan")
            return
        link = self._current(probe)
        if link is None:
            entry.update(status="changed", reason="link changed during the scan")
            return
        now = self.gw.clock()
        entry["humanTurns"] = turns
        if turns == 0:
            moved = self.store.advance_link(key, agent, link.updated_at, outcome.next_marker, now)
            entry["status"] = "advanced" if moved else "changed"
            return
        if not isinstance(outcome.dedupe_id, str) or not outcome.dedupe_id:
            entry.update(status="invalid", reason="the provider returned an unusable outcome")
            return
        occurred = outcome.occurred_at if outcome.occurred_at is not None else now
        rec = self.gw.record(
            EventInput(
                key,
                agent,
                kinds.HUMAN_DIRECT_MESSAGE,
                "human",
                kinds.human_message_summary(link.catalog_id),
                occurred,
                session_id=session.session_id,
                dedupe_key=f"upstream:{key}:{probe.source_key}:{outcome.dedupe_id}",
                payload={"turns": turns} if turns > 1 else None,
                watchers=(session.spawned_by,) if session.spawned_by else (),
                only_if_watched=not session.spawned_by,
                expected_link=expected(link),
            )
        )
        if rec is None:
            # the marker stays: the activity is found again next tick
            entry.update(status="record-failed", reason="the recording failed; the next tick finds it again")
            return
        self.store.advance_link(key, agent, link.updated_at, outcome.next_marker, now)
        seq = rec.event.sequence if rec.event is not None else None
        if rec.inserted:
            entry.update(status="recorded", inserted=True, sequence=seq)
        else:  # the same activity was recorded before (the marker had not moved): nobody is told twice
            entry.update(
                status="deduplicated",
                inserted=False,
                sequence=seq,
                reason=f"already recorded as event {seq}; no new notice",
            )
