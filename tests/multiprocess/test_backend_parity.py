"""The PostgreSQL store against the SQLite reference, operation by operation.

Seeded random walks drive two gateways (one per backend, the same manual clock, a tiny queue cap and
row cap so eviction and pruning happen constantly) through the public engine API. After every step
the results, the queues (ids included), cursors, logs, versions and delivered wakes must be equal.
The conformance suite checks behaviour against expectations; this checks that nothing observable
differs between the backends, including choices the suite does not pin.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

from sessionwatch import Gateway, SessionwatchError, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.notices import context_key_for, notice_text
from tests.support import pg

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")]

SEEDS = range(1, 1 + int(os.environ.get("SESSIONWATCH_PARITY_SEEDS", "4")))  # more: a longer search
DAY = 86_400_000
SETTINGS = Settings(queue_cap=3, max_events=15, retention_ms=2 * DAY, prune_interval_ms=0)
KEYS = [
    "agent:a:main",
    "agent:a:p1",
    "agent:a:dm:bob",
    "agent:a:telegram:group:g",
    "agent:a:subagent:c1",
    "agent:a:subagent:c2",
    "agent:b:main",
    "global",
]
QUALIFIED = [k for k in KEYS if k != "global"]


def _agent(key: str) -> str | None:
    return "a" if key == "global" else None


def _clean(value: Any) -> Any:
    """Drop what is random by design (session ids, and the dedupe keys built from them)."""
    if isinstance(value, dict):
        return {
            k: _clean(v)
            for k, v in value.items()
            if k != "sessionId" and not (k == "dedupeKey" and str(v).startswith("created:"))
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return ("ok", _clean(fn(*args, **kwargs)))
    except SessionwatchError as exc:
        return ("error", exc.code, exc.message)


class Pair:
    """The same operation on both gateways; results must match."""

    def __init__(self, sqlite_url: str, pg_url: str) -> None:
        self.clock = ManualClock()
        self.gws = [
            Gateway.open(sqlite_url, clock=self.clock, settings=SETTINGS),
            Gateway.open(pg_url, clock=self.clock, settings=SETTINGS),
        ]
        self.wakes: list[list[tuple[str, str, bool]]] = [[], []]
        for i, gw in enumerate(self.gws):
            for k in QUALIFIED:
                gw.subscribe_wakes(k, lambda w, i=i: self.wakes[i].append((w.watcher, w.target, w.trailing)))

    def close(self) -> None:
        for gw in self.gws:
            gw.close()

    def do(self, step: str, name: str, *args: Any, **kwargs: Any) -> None:
        results = [_call(getattr(gw, name), *args, **kwargs) for gw in self.gws]
        assert results[0] == results[1], f"{step}: {name}{args}{kwargs}"

    def check(self, step: str) -> None:
        for gw in self.gws:
            gw.run_due()
        views = []
        for gw in self.gws:
            view: dict[str, Any] = {
                "cursors": gw.cursors(),
                "queues": {k: _call(gw.peek_system_events, k, agent_id=_agent(k)) for k in KEYS},
                "versions": {k: gw.state_version(k, agent_id=_agent(k)) for k in KEYS},
                "changes": {k: gw.changes_since(k, 0, agent_id=_agent(k)).to_json() for k in KEYS},
                "log": _clean(gw.events_after(0, 1000)),
                "sessions": _clean([r.to_json() for r in gw.list_sessions(limit=100)]),
            }
            views.append(view)
        for part in views[0]:
            assert views[0][part] == views[1][part], f"after {step}: {part} differ"
        assert self.wakes[0] == self.wakes[1], f"after {step}: wakes differ"


def _walk(pair: Pair, rng: random.Random, steps: int) -> None:
    for k in ["agent:a:main", "agent:a:p1", "agent:a:dm:bob", "agent:a:telegram:group:g", "agent:b:main"]:
        pair.do("setup", "put_session", k)
    pair.do("setup", "put_session", "global", agent_id="a")
    for step in range(steps):
        op = rng.choice(
            [
                "human",
                "human",
                "human",
                "goal",
                "watch",
                "unwatch",
                "ack",
                "drain",
                "drain",
                "peek",
                "enqueue",
                "enqueue",
                "spawn",
                "end_run",
                "compact",
                "sweep",
                "prune",
                "reset",
                "delete",
                "recreate",
                "tick",
                "tick",
                "send",
            ]
        )
        k = rng.choice(KEYS)
        q = rng.choice(QUALIFIED)
        label = f"{step}:{op}"
        if op == "human":
            pair.do(
                label,
                "inbound",
                k,
                "typed",
                channel=rng.choice(["telegram", "web"]),
                agent_id=_agent(k),
                human_id=rng.choice([None, "bob"]),
                dedupe_key=rng.choice([None, None, "d1", "d2"]),
            )
        elif op == "goal":
            pair.do(
                label,
                "set_goal",
                k,
                rng.choice(["create", "status", "clear"]),
                objective="ship it",
                status="done",
                actor=rng.choice([None, {"type": "human"}, {"type": "agent", "id": q}]),
                agent_id=_agent(k),
            )
        elif op == "watch":
            pair.do(label, "watch", q, k, agent_id=_agent(k))
        elif op == "unwatch":
            pair.do(label, "unwatch", q, rng.choice(QUALIFIED))
        elif op == "ack":
            pair.do(label, "acknowledge", q, rng.sample(QUALIFIED, rng.randint(1, 3)))
        elif op == "drain":
            pair.do(label, "drain_system_events", k, agent_id=_agent(k))
        elif op == "peek":
            pair.do(label, "peek_system_events", k, agent_id=_agent(k))
        elif op == "enqueue":
            t = rng.choice(QUALIFIED)
            text, ctx = rng.choice(
                [
                    ("cron ran", None),
                    ("cron ran", "cron:1"),
                    ("other", "cron:1"),
                    (notice_text(t, rng.randint(0, 6)), context_key_for(t)),
                    ("free text", context_key_for(t)),
                ]
            )
            pair.do(label, "enqueue_system_event", q, text, context_key=ctx)
        elif op == "spawn":
            parent = rng.choice(["agent:a:main", "agent:a:p1"])
            pair.do(
                label,
                "call_tool",
                "sessions_spawn",
                {"label": rng.choice(["c1", "c2"]), "runId": f"r{rng.randint(0, 5)}"},
                caller=parent,
            )
        elif op == "send":
            pair.do(
                label,
                "call_tool",
                "sessions_send",
                {
                    "sessionKey": rng.choice(QUALIFIED),
                    "message": "hello",
                    "timeoutSeconds": 0,
                    "watch": rng.choice([True, False]),
                },
                caller=rng.choice(["agent:a:main", "agent:a:p1"]),
            )
        elif op == "end_run":
            pair.do(
                label,
                "end_run",
                rng.choice(["agent:a:subagent:c1", "agent:a:subagent:c2"]),
                f"r{rng.randint(0, 5)}",
                rng.choice(["ok", "error"]),
            )
        elif op == "compact":
            pair.do(label, "record_compaction", k, f"op{rng.randint(0, 3)}", agent_id=_agent(k))
        elif op == "sweep":
            pair.do(label, "sweep")
        elif op == "prune":
            pair.do(label, "prune", force=rng.choice([True, False]))
        elif op == "reset":
            pair.do(label, "reset_session", q)
        elif op == "delete":
            pair.do(label, "delete_session", q)
        elif op == "recreate":
            pair.do(label, "put_session", q)
        elif op == "tick":
            pair.clock.advance(rng.choice([1, 5_000, 21_000, DAY]))
        pair.check(label)


@pytest.fixture
def pair(sqlite_url: str) -> Iterator[Pair]:
    with pg.fresh_database() as url:
        p = Pair(sqlite_url, url)
        try:
            yield p
        finally:
            p.close()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.slow
def test_postgres_matches_sqlite_step_by_step(pair: Pair, seed: int) -> None:
    _walk(pair, random.Random(seed), 150)
