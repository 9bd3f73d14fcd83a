"""Log, cursors, watches and maintenance: ``/v1/events``, ``/v1/cursors``, ``/v1/watch``, ``/v1/prune``."""

from __future__ import annotations

from typing import Any

from ..validation import MAX_SEQUENCE
from . import schemas
from .auth import ADMIN_ONLY, OWN_VIEW, sessions
from .endpoints import Call, Endpoint


def _cursors(c: Call) -> Any:
    rows = c.gw.cursors(watcher=c.query.get("watcher"), target=c.query.get("target"))
    if not c.principal.admin:  # a scoped token sees pairs whose watcher and target are both its agents'
        rows = [r for r in rows if c.principal.covers_key(r["watcher"]) and c.principal.covers_key(r["target"])]
    return {"cursors": rows}


def _events(c: Call) -> Any:
    return {
        "events": c.gw.events_after(
            c.query.get("after", 0), c.query.get("limit", 200), agents=c.principal.agent_filter()
        )
    }


def _watch(c: Call) -> Any:
    return {"watched": c.gw.watch(c.body["watcher"], c.body["target"], agent_id=c.body.get("agentId"))}


def _unwatch(c: Call) -> Any:
    return {"unwatched": c.gw.unwatch(c.body["watcher"], c.body["target"])}


def _prune(c: Call) -> Any:
    return c.gw.prune(force=c.body.get("force", True)).to_json()


def _sweep(c: Call) -> Any:
    return {"swept": c.gw.sweep()}


ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/cursors",
        "cursors",
        "Watch cursors (who watches whom), filtered by watcher and/or target.",
        _cursors,
        tag="log",
        query={"watcher": schemas.KEY, "target": schemas.KEY},
        result=schemas.R_CURSORS,
        touches=OWN_VIEW,
    ),
    Endpoint(
        "GET",
        "/v1/events",
        "events_after",
        "The signal log of every session after a sequence, ascending (for tailing).",
        _events,
        tag="log",
        query={
            "after": {"type": "integer", "minimum": 0, "maximum": MAX_SEQUENCE, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 200},
        },
        result=schemas.R_EVENTS,
        touches=OWN_VIEW,
    ),
    Endpoint(
        "POST",
        "/v1/watch",
        "watch",
        "Register an explicit watch, seeded at the target's head.",
        _watch,
        tag="log",
        body=schemas.WATCH,
        result=schemas.R_WATCHED,
        touches=sessions("body:watcher", "body:target"),
    ),
    Endpoint(
        "POST",
        "/v1/unwatch",
        "unwatch",
        "Drop a watch and its pending notice (mutes spawn-parent notices).",
        _unwatch,
        tag="log",
        body=schemas.UNWATCH,
        result=schemas.R_UNWATCHED,
        touches=sessions("body:watcher", "body:target"),
    ),
    Endpoint(
        "POST",
        "/v1/prune",
        "prune",
        "Prune the log to its retention and row cap now.",
        _prune,
        tag="log",
        body=schemas.PRUNE,
        result=schemas.R_PRUNE,
        thread=True,
        touches=ADMIN_ONLY,
    ),
    Endpoint(
        "POST",
        "/v1/sweep",
        "sweep",
        "Re-materialize unacknowledged notices (what a restart does).",
        _sweep,
        tag="log",
        body=schemas.EMPTY,
        result=schemas.R_SWEPT,
        thread=True,
        touches=ADMIN_ONLY,
    ),
]
