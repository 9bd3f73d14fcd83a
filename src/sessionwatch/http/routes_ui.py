"""Read-only JSON for the dashboard (``/ui``): what the existing routes do not already answer in one call.

Nothing here writes: no cursor moves, no queue entry is acknowledged, no read is "reconciled" (the
session page shows what ``changesSince N`` returns by reading the store, not by calling the tool as a
watcher, which would acknowledge). Every route narrows to a scoped token's agents.
"""

from __future__ import annotations

from typing import Any

from ..access import Principal
from ..engine import Gateway
from ..errors import SessionwatchError
from ..notices import context_key_for
from ..settings import MAX_LIST_LIMIT
from ..validation import MAX_SEQUENCE
from . import schemas
from .auth import OWN_VIEW, sessions
from .endpoints import Call, Endpoint
from .runtime import redact_url

RECENT_EVENTS = 500  # the overview's "last activity" looks this far back in the log
TIMELINE = 100  # events on a session's page
TIMELINE_PAGES = 10  # changesSince pages read at most to find a session's newest events


def _read(gw: Gateway, fn: Any, what: str) -> Any:
    return gw._host_read(fn, what)  # a failed read is a 503, never an empty view


def _link_state(link: Any) -> dict[str, Any]:
    state = "missing" if link.miss_count else ("scanned" if link.last_scanned_at else "adopted")
    return {
        "catalogId": link.catalog_id,
        "threadId": link.thread_id,
        "state": state,
        "lastScannedAt": link.last_scanned_at,
        "missCount": link.miss_count,
    }


def _pending(gw: Gateway, watchers: set[str]) -> dict[tuple[str, str], str]:
    """(watcher, context key) -> the queued notice text, peeked (never drained or acknowledged)."""
    out: dict[tuple[str, str], str] = {}
    for w in sorted(watchers):
        try:
            entries = gw.peek_system_events(w)
        except SessionwatchError:  # a watcher whose session is gone has no queue to show
            continue
        for e in entries:
            if e.get("contextKey"):
                out[(w, e["contextKey"])] = e["text"]
    return out


def _pairs(gw: Gateway, principal: Principal, **which: Any) -> list[dict[str, Any]]:
    rows = [r for r in gw.cursors(**which) if principal.covers_key(r["watcher"]) and principal.covers_key(r["target"])]
    stale = [r for r in rows if r["material"] > r["lastSeen"]]
    texts = _pending(gw, {r["watcher"] for r in stale})
    for r in rows:
        r["stale"] = r["material"] > r["lastSeen"]
        if r["stale"]:
            r["notice"] = texts.get((r["watcher"], context_key_for(r["target"])))
    return rows


def _overview(c: Call) -> Any:
    gw, agents = c.gw, c.principal.agent_filter()
    rows = gw.list_sessions(limit=MAX_LIST_LIMIT, agents=agents)
    pairs = [(r.session_key, r.agent_id) for r in rows]
    versions = _read(gw, lambda: gw.store.state_versions(pairs), "reading stateVersions")
    states = _read(gw, lambda: gw.store.lifecycles(pairs), "reading lifecycle states")
    links = {(x.session_key, x.agent_id): x for x in _read(gw, gw.store.links, "reading upstream links")}
    bounds = gw.log_bounds(agents=agents)
    recent = gw.events_after(max(0, bounds.last - RECENT_EVENTS), 1000, agents=agents)
    active: dict[tuple[str, str], int] = {}
    for e in recent:
        k = (e["sessionKey"], e["agentId"])
        active[k] = max(active.get(k, 0), int(e["occurredAt"]))
    sessions_out = []
    for r in rows:
        item = r.to_json()
        item.pop("goal", None)
        item["stateVersion"] = versions.get((r.session_key, r.agent_id), 0)
        item["lastActivity"] = active.get((r.session_key, r.agent_id), r.updated_at)
        lifecycle = states.get((r.session_key, r.agent_id))
        item["lifecycle"] = lifecycle.to_json() if lifecycle is not None else None
        link = links.get((r.session_key, r.agent_id))
        item["link"] = _link_state(link) if link is not None else None
        sessions_out.append(item)
    return {
        "sessions": sessions_out,
        "truncated": len(rows) >= MAX_LIST_LIMIT,
        "watches": _pairs(gw, c.principal),
        "head": bounds.last,
        "recent": recent[-200:],
    }


def _health(c: Call) -> Any:
    """The gateway's state. A scoped token gets figures about its own agents only (its log's bounds, its
    streams, its dropped recordings; the sweep's count not at all): another agent's activity is not its
    business. Sequences stay the log's own numbers."""
    gw, runtime, agents = c.gw, c.runtime, c.principal.agent_filter()
    url = str(getattr(gw.store, "url", ""))
    bounds = gw.log_bounds(agents=agents)
    links = [x for x in _read(gw, gw.store.links, "reading upstream links") if c.principal.covers(x.agent_id)]
    tick = gw.upstream_results()
    per_link = {(e.get("sessionKey"), e.get("agentId")): e for e in tick.get("links", []) if isinstance(e, dict)}
    return {
        "store": {
            "backend": url.split(":", 1)[0] or "unknown",
            "url": redact_url(url),
            "readOnly": bool(getattr(gw, "read_only", False)),
        },
        "sweep": {
            "ran": gw.sweep_ran,
            "at": gw.swept_at,
            "swept": gw.swept if agents is None else None,
            "error": gw.sweep_error,
        },
        "prune": {
            "lastAt": bounds.pruned_at,
            "prunedThrough": bounds.pruned,
            "intervalMs": gw.settings.prune_interval_ms,
            "retentionMs": gw.settings.retention_ms,
            "maxEvents": gw.settings.max_events,
        },
        "log": {"earliest": bounds.earliest, "last": bounds.last},
        "streams": runtime.streams_of(agents),
        "droppedRecordings": gw.dropped_recordings_of(agents),
        "monitor": {
            "tick": tick.get("tick"),
            "status": tick.get("status"),
            "startedAt": tick.get("startedAt"),
            "finishedAt": tick.get("finishedAt"),
            "links": [
                {
                    "sessionKey": x.session_key,
                    "agentId": x.agent_id,
                    **_link_state(x),
                    "lastTick": {
                        k: v
                        for k, v in per_link.get((x.session_key, x.agent_id), {}).items()
                        if k in ("status", "reason", "humanTurns", "recorded", "error")
                    },
                }
                for x in links
            ],
        },
    }


def _timeline(gw: Gateway, key: str, agent: str) -> dict[str, Any]:
    """The newest events of a session, oldest first (changesSince pages, read forward from the start)."""
    after, truncated = 0, False
    events: list[dict[str, Any]] = []
    for _ in range(TIMELINE_PAGES):
        page = gw.changes_since(key, after, agent_id=agent)
        events = (events + page.to_json()["events"])[-TIMELINE:]
        if not page.truncated or not page.events:
            break
        after = int(page.events[-1]["sequence"])
    else:
        truncated = True  # an older window: the session has more events than this page walk reads
    return {"events": events, "partial": truncated}


def _inspect(c: Call) -> Any:
    gw = c.gw
    key, agent = gw.resolve(c.path["key"], c.query.get("agentId"), stored=True)  # a read (keys.parse_key)
    session = gw.get_session(key, agent)
    after = c.query.get("after", 0)
    changes = gw.changes_since(key, after, agent_id=agent).to_json()
    return {
        "session": session,
        "timeline": _timeline(gw, key, agent),
        "changesSince": {"after": after, "stateVersion": session["stateVersion"], **changes},
        "watchers": _pairs(gw, c.principal, target=key),
        "watching": _pairs(gw, c.principal, watcher=key),
        "queue": gw.peek_system_events(key, agent_id=agent),
        "link": gw.link(key, agent),
    }


ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/ui/overview",
        "ui_overview",
        "Dashboard: sessions (with stateVersion, last activity, lifecycle state and "
        "upstream link state), watch pairs (stale ones with their pending notice text) and the log's head.",
        _overview,
        tag="dashboard",
        thread=True,
        touches=OWN_VIEW,
    ),
    Endpoint(
        "GET",
        "/v1/ui/health",
        "ui_health",
        "Dashboard: store backend, restart sweep, prune times and "
        "watermark, SSE streams, dropped recordings, and the upstream monitor's last tick per link. "
        "A scoped token's figures are about its own agents only.",
        _health,
        tag="dashboard",
        touches=OWN_VIEW,
    ),
    Endpoint(
        "GET",
        "/v1/sessions/{key}/inspect",
        "ui_session",
        "Dashboard: one session's timeline, what "
        "changesSince N returns (read without acknowledging anything), its watchers and cursors, and its "
        "queue (peeked).",
        _inspect,
        tag="dashboard",
        thread=True,
        query={
            "after": {"type": "integer", "minimum": 0, "maximum": MAX_SEQUENCE, "default": 0},
            "agentId": schemas.AGENT_ID,
        },
        touches=sessions("path:key"),
    ),
]
