"""sessions_list pages (keyset, ``cursor`` in, ``nextCursor`` out) on every backend.

The order is creation time, newest first, then sessionKey, then agentId. A walk from the first page to
the last returns every session that exists for the whole walk exactly once and in order, whatever is
updated, created or deleted between two pages; a session created or deleted meanwhile at most once.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from sessionwatch.errors import InvalidArgument

from .helpers import MAIN, err, ok
from .suite import SuiteBase

Key = tuple[str, str]  # (sessionKey, agentId)


def walk(
    gw: Gateway,
    args: dict[str, Any],
    limit: int,
    *,
    scope: frozenset[str] | None = None,
    caller: str = MAIN,
    between: Callable[[int, list[Key]], None] | None = None,
) -> list[Key]:
    """Every page from the first to the last; ``between(pages, returned)`` runs before each next page."""
    out: list[Key] = []
    cursor: str | None = None
    for pages in range(1, 500):  # a cursor that stood still would loop forever: fail instead
        call = dict(args, limit=limit, **({"cursor": cursor} if cursor else {}))
        page = ok(gw.call_tool("sessions_list", call, caller=caller, scope=scope))
        out += [(s["sessionKey"], s["agentId"]) for s in page["sessions"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            assert "More sessions" not in page["text"]
            return out
        assert len(page["sessions"]) == limit, "a page with a next cursor is full"
        assert cursor in page["text"], "the text tells an agent how to get the next page"
        if between is not None:
            between(pages, list(out))
    raise AssertionError(f"the walk did not end: {out[-10:]}")


def put(
    gw: Gateway,
    clock: ManualClock,
    created: dict[Key, int],
    key: str,
    agent: str | None = None,
    kind: str | None = None,
) -> Key:
    row = gw.put_session(key, agent_id=agent, kind=kind)
    pair = (row["sessionKey"], row["agentId"])
    created[pair] = clock.now
    return pair


def in_order(created: dict[Key, int], keys: Any) -> list[Key]:
    return sorted(keys, key=lambda k: (-created[k], k[0], k[1]))


def populate(gw: Gateway, clock: ManualClock) -> tuple[dict[Key, int], dict[Key, str]]:
    """Three agents, every kind, ties within a millisecond, and 'global' for three agents at once."""
    created: dict[Key, int] = {}
    kinds: dict[Key, str] = {}
    for step, kind in enumerate(("main", "subagent", "cron", "group", "direct", "other", "subagent", "cron")):
        for agent in ("a", "b", "c"):
            kinds[put(gw, clock, created, f"agent:{agent}:s{step}", kind=kind)] = kind
        if step % 3 != 1:  # some steps share a millisecond with the next one
            clock.advance(7)
    clock.advance(1)
    for agent in ("c", "a", "b"):  # same key, same millisecond: ordered by agentId
        kinds[put(gw, clock, created, "global", agent, kind="main")] = "main"
    return created, kinds


FILTERS: list[tuple[dict[str, Any], frozenset[str] | None]] = [
    ({}, None),
    ({"agentId": "b"}, None),
    ({"kinds": ["cron", "subagent"]}, None),
    ({"agentId": "a", "kinds": ["group"]}, None),
    ({"agentId": "c", "kinds": ["main", "other", "direct"]}, None),
    ({}, frozenset({"a", "c"})),
    ({"kinds": ["main", "cron"]}, frozenset({"a", "c"})),
    ({"agentId": "a"}, frozenset({"a", "c"})),
]


def _cursor(body: object) -> str:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


GOOD = {"v": 1, "c": 5, "k": "agent:a:s1", "a": "a", "f": [None, None]}
BAD_CURSORS = [
    "",
    5,
    True,
    ["x"],
    {"c": 1},
    "not base64!",
    "A" * 9000,
    _cursor(b"\xff\xfe\xfd"),
    _cursor(b"{not json"),
    _cursor([1, 2]),
    _cursor({**GOOD, "v": 2}),
    _cursor({**GOOD, "c": True}),
    _cursor({**GOOD, "c": "5"}),
    _cursor({**GOOD, "c": 1.5}),
    _cursor({**GOOD, "c": 2**63}),
    _cursor({**GOOD, "k": "agent::x"}),
    _cursor({**GOOD, "k": 7}),
    _cursor({**GOOD, "a": "a:b"}),
    _cursor({**GOOD, "extra": 1}),
    _cursor({k: v for k, v in GOOD.items() if k != "f"}),
    _cursor({**GOOD, "f": [None, ["main"]]}),
    _cursor({**GOOD, "f": ["a", None]}),
    _cursor(b"[" * 5000),
]


# -- a random walk against a small model ------------------------------------------------------------------

_EXAMPLES = int(os.environ.get("SESSIONWATCH_LIST_EXAMPLES", "40"))
_op = st.one_of(
    st.tuples(st.just("update"), st.integers(0, 30)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
    st.tuples(st.just("insert"), st.integers(0, 1), st.sampled_from(["main", "cron", "other"]), st.integers(-30, 3)),
    st.tuples(st.just("tick"), st.integers(0, 3)),
)


class ListPageTests(SuiteBase):
    """sessions_list pages (keyset, ``cursor`` in, ``nextCursor`` out) on every backend."""

    @pytest.mark.parametrize(("args", "scope"), FILTERS)
    def test_a_walk_returns_every_session_once_in_order(
        self, gw: Gateway, clock: ManualClock, args: dict[str, Any], scope: frozenset[str] | None
    ) -> None:
        created, kinds = populate(gw, clock)
        agents = scope if "agentId" not in args else {args["agentId"]}
        expected = in_order(
            created,
            [
                k
                for k in created
                if (agents is None or k[1] in agents) and kinds[k] in args.get("kinds", kinds.values())
            ],
        )
        assert expected, "the filter selects something"
        for limit in (1, 2, 5, max(1, len(expected) - 1), len(expected), 1000):
            assert walk(gw, args, limit, scope=scope) == expected, limit
        if not args and scope is None:  # the three 'global' sessions of one millisecond, by agentId
            assert expected[:3] == [("global", "a"), ("global", "b"), ("global", "c")]

    def test_the_last_page_has_no_cursor(self, gw: Gateway, clock: ManualClock) -> None:
        assert ok(gw.call_tool("sessions_list", {}, caller=MAIN)) == {"sessions": [], "text": "No sessions."}
        for i in range(3):
            gw.put_session(f"agent:a:s{i}")
            clock.advance(1)
        exact = ok(gw.call_tool("sessions_list", {"limit": 3}, caller=MAIN))
        assert len(exact["sessions"]) == 3 and "nextCursor" not in exact
        first = ok(gw.call_tool("sessions_list", {"limit": 2}, caller=MAIN))
        assert [s["sessionKey"] for s in first["sessions"]] == ["agent:a:s2", "agent:a:s1"]
        last = ok(gw.call_tool("sessions_list", {"limit": 2, "cursor": first["nextCursor"]}, caller=MAIN))
        assert [s["sessionKey"] for s in last["sessions"]] == ["agent:a:s0"] and "nextCursor" not in last
        # The Python API: the same pages, and the same cursor.
        page = gw.list_sessions_page(limit=2)
        assert [r.session_key for r in page.rows] == ["agent:a:s2", "agent:a:s1"]
        assert page.next_cursor == first["nextCursor"]
        assert [r.session_key for r in gw.list_sessions(limit=2, cursor=page.next_cursor)] == ["agent:a:s0"]

    def test_updates_inserts_and_deletes_between_pages_move_nothing(self, gw: Gateway, clock: ManualClock) -> None:
        created: dict[Key, int] = {}
        for i in range(12):
            put(gw, clock, created, f"agent:a:s{i:02d}")
            if i % 2:
                clock.advance(3)
        original = in_order(created, created)
        inserted: list[Key] = []

        def churn(pages: int, returned: list[Key]) -> None:
            clock.advance(5)
            for key, agent in list(created):
                # every kind of update a host makes: a re-put, a goal, a run, a reset (each bumps updatedAt)
                gw.put_session(key, agent_id=agent, label=f"p{pages}")
                gw.set_goal(key, "create", objective=f"goal {pages}", agent_id=agent)
                gw.begin_run(key, f"run-{pages}", agent_id=agent)
                if pages == 2:
                    gw.reset_session(key, agent_id=agent)
            inserted.append(put(gw, clock, created, f"agent:a:new{pages}"))
            gone = returned[-1]  # a session already returned is deleted: the walk goes on from where it was
            gw.delete_session(gone[0], gone[1])
            del created[gone]

        seen = walk(gw, {}, 3, between=churn)
        assert seen == original  # every original session once, in the original order
        assert len(inserted) == 3 and not set(inserted) & set(seen)
        fresh = walk(gw, {}, 3)
        assert fresh[: len(inserted)] == inserted[::-1]  # the next walk starts with what was created meanwhile
        assert fresh == in_order(created, created)

    def test_a_session_created_behind_the_cursor_is_returned_once(self, gw: Gateway, clock: ManualClock) -> None:
        created: dict[Key, int] = {}
        for i in range(6):
            put(gw, clock, created, f"agent:a:s{i}")
            clock.advance(10)
        early = clock.now - 55  # older than s1 (its clock skewed back, e.g. another gateway)

        def late_insert(pages: int, returned: list[Key]) -> None:
            if pages == 1:
                now, clock.now = clock.now, early
                put(gw, clock, created, "agent:a:late")
                clock.now = now

        seen = walk(gw, {}, 2, between=late_insert)
        assert seen == in_order(created, created)
        assert seen.count(("agent:a:late", "a")) == 1

    @pytest.mark.parametrize("cursor", BAD_CURSORS, ids=range(len(BAD_CURSORS)))
    def test_a_bad_cursor_is_invalid_argument(self, gw: Gateway, cursor: object) -> None:
        gw.put_session(MAIN)
        assert "cursor" in err(gw.call_tool("sessions_list", {"cursor": cursor}, caller=MAIN), "invalid_argument")
        if isinstance(cursor, str):
            with pytest.raises(InvalidArgument):
                gw.list_sessions(cursor=cursor)

    def test_a_cursor_belongs_to_its_filter(self, gw: Gateway, clock: ManualClock) -> None:
        for i in range(4):
            gw.put_session(f"agent:a:s{i}", kind="cron" if i % 2 else "main")
            gw.put_session(f"agent:b:s{i}")
            clock.advance(1)
        by_agent = ok(gw.call_tool("sessions_list", {"agentId": "a", "limit": 1}, caller=MAIN))["nextCursor"]
        by_kinds = ok(gw.call_tool("sessions_list", {"kinds": ["main", "cron"], "limit": 1}, caller=MAIN))["nextCursor"]
        for args in (
            {"cursor": by_agent},
            {"agentId": "b", "cursor": by_agent},
            {"agentId": "a", "kinds": ["main"], "cursor": by_agent},
            {"cursor": by_kinds},
            {"kinds": ["main"], "cursor": by_kinds},
        ):
            message = err(gw.call_tool("sessions_list", args, caller=MAIN), "invalid_argument")
            assert "different agentId/kinds filter" in message
        # the same filter, kinds in any order, any limit: accepted
        ok(gw.call_tool("sessions_list", {"agentId": "a", "limit": 5, "cursor": by_agent}, caller=MAIN))
        ok(gw.call_tool("sessions_list", {"kinds": ["cron", "main", "cron"], "cursor": by_kinds}, caller=MAIN))

    def test_a_cursor_is_no_key_to_other_agents(self, gw: Gateway, clock: ManualClock) -> None:
        for i in range(3):
            gw.put_session(f"agent:ops:s{i}")
            gw.put_session(f"agent:dev:s{i}")
            clock.advance(1)
        admin = ok(gw.call_tool("sessions_list", {"limit": 1}, caller=MAIN))["nextCursor"]
        scoped = ok(gw.call_tool("sessions_list", {"cursor": admin}, caller="agent:ops:main", scope=frozenset({"ops"})))
        assert {s["agentId"] for s in scoped["sessions"]} == {"ops"}
        forged = _cursor({"v": 1, "c": 10**15, "k": "agent:dev:s9", "a": "dev", "f": [None, None]})
        again = ok(gw.call_tool("sessions_list", {"cursor": forged}, caller="agent:ops:main", scope=frozenset({"ops"})))
        assert {s["agentId"] for s in again["sessions"]} == {"ops"}

    @given(
        initial=st.lists(
            st.tuples(st.integers(0, 1), st.sampled_from(["main", "cron", "other"]), st.integers(0, 2)),
            min_size=0,
            max_size=14,
        ),
        limit=st.integers(1, 4),
        filt=st.sampled_from(["none", "agent", "kinds", "agent+kinds"]),
        churn=st.lists(st.lists(_op, max_size=4), max_size=8),
    )
    @settings(
        max_examples=_EXAMPLES,
        deadline=None,
        database=None,
        # differing_executors: the one method runs for every StoreConformance subclass (each its own store)
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.differing_executors,
        ],
    )
    def test_walks_match_the_model(
        self,
        gw: Gateway,
        clock: ManualClock,
        initial: list[tuple[int, str, int]],
        limit: int,
        filt: str,
        churn: list[list[tuple[Any, ...]]],
    ) -> None:
        # Each example lists only its own two agents (a scoped view), so one store serves every example.
        tag = f"x{clock.advance(1000)}"
        agents = (f"{tag}p", f"{tag}q")
        scope = frozenset(agents)
        created: dict[Key, tuple[int, str]] = {}
        names = itertools.count()

        def insert(agent: int, kind: str) -> Key:
            row = gw.put_session(f"agent:{agents[agent]}:n{next(names)}", kind=kind)
            pair = (row["sessionKey"], row["agentId"])
            created[pair] = (clock.now, kind)
            return pair

        for agent, kind, dt in initial:
            insert(agent, kind)
            clock.advance(dt)
        args: dict[str, Any] = {}
        if "agent" in filt:
            args["agentId"] = agents[0]
        if "kinds" in filt:
            args["kinds"] = ["cron", "other"]

        def matches(pair: Key) -> bool:
            return pair[1] in {args.get("agentId", pair[1])} and created[pair][1] in args.get(
                "kinds", [created[pair][1]]
            )

        throughout = {p for p in created if matches(p)}
        deleted: set[Key] = set()
        batches = iter(churn)

        def between(pages: int, returned: list[Key]) -> None:
            for op in next(batches, []):
                live = sorted(p for p in created if p not in deleted)
                if op[0] == "update" and live:
                    pair = live[op[1] % len(live)]
                    gw.set_goal(pair[0], "create", objective="moved", agent_id=pair[1])
                elif op[0] == "delete" and live:
                    pair = live[op[1] % len(live)]
                    gw.delete_session(pair[0], pair[1])
                    deleted.add(pair)
                    throughout.discard(pair)
                elif op[0] == "insert":
                    now = clock.now
                    clock.now = now + op[3]  # negative: a clock behind the walk's position
                    insert(op[1], op[2])
                    clock.now = max(now, clock.now)
                elif op[0] == "tick":
                    clock.advance(op[1])

        seen = walk(gw, args, limit, scope=scope, caller=f"agent:{agents[0]}:main", between=between)
        assert len(seen) == len(set(seen)), "no session twice"
        assert all(matches(p) for p in seen)
        order = [(-created[p][0], p[0], p[1]) for p in seen]
        assert order == sorted(order), "in the listing order"
        assert throughout <= set(seen), "every session that existed for the whole walk"
        live = [p for p in created if p not in deleted and matches(p)]
        assert walk(gw, args, limit, scope=scope, caller=f"agent:{agents[0]}:main") == sorted(
            live, key=lambda p: (-created[p][0], p[0], p[1])
        ), "a walk without churn is the model's order"
