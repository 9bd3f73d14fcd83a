"""A random-walk check of the watch machinery against a small reference model.

Hypothesis drives spawns, watched sends, human turns (parented and not), goal changes by various
actors (the watcher itself included), drains, peeks and acknowledgments by entry id (of ids that may
have gone stale since), reconciling reads, restarts (close + reopen on the same store), resets,
unwatches, prunes and clock moves. After every step the real gateway must match the model exactly
(cursors, queues byte for byte, heads, retained log, history gaps) and the invariants hold.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sessionwatch import Gateway, SessionwatchError, Settings
from sessionwatch.clock import ManualClock

from .helpers import DAY, HOUR, MAIN, SECOND, ctx, notice
from .suite import Stores, SuiteBase

CAP = 20
MAX_EVENTS = 12  # small, so the row cap and its history gaps come into play
RETENTION = 30 * DAY
NOTIFY = {"human_direct_message", "goal_changed"}

P1, P2 = "agent:a:p1", "agent:a:p2"
DM = "agent:a:dm:bob"
GROUP = "agent:a:telegram:group:g"
CHILDREN = ["agent:a:subagent:c1", "agent:a:subagent:c2"]
PARENTS = [MAIN, P1]
FIXED = [MAIN, P1, P2, DM, GROUP]
EVERYONE = FIXED + CHILDREN


@dataclass
class Cur:
    last_seen: int
    notified: int
    material: int
    provenance: str
    updated_at: int
    row: int = 0  # which incarnation of the pair's cursor (a deleted cursor may come back from 0)


@dataclass(eq=False)
class Ent:
    """One queue entry; identity (not value) is the entry id: a replaced notice is a new Ent."""

    kind: str  # "n" (a pair's notice) or "g" (generic)
    t: str  # the target ("n") or the text ("g")
    ls: int = 0  # the last_seen a notice quotes


@dataclass
class Sess:
    spawned_by: str | None
    kind: str
    active_run: str | None = None
    goal: bool = False


class Model:
    """What the store should hold. Sequences are learned from the real log as events appear."""

    def __init__(self) -> None:
        self.sessions: dict[str, Sess] = {}
        self.heads: dict[str, int] = {}
        self.pruned: dict[str, int] = {}
        self.events: list[tuple[int, str, str, int]] = []  # (sequence, key, kind, occurredAt)
        self.cursors: dict[tuple[str, str], Cur] = {}
        self.queues: dict[str, list[Ent]] = {}
        self.mutes: set[tuple[str, str]] = set()
        self.next_prune_at = 0
        self.rows = itertools.count(1)
        self.fresh: list[dict[str, Any]] = []  # real events of the current step, not yet matched

    # -- the queue -------------------------------------------------------------------------------
    def queue(self, w: str) -> list[Ent]:
        return self.queues.setdefault(w, [])

    def texts(self, w: str) -> list[str]:
        return [notice(e.t, e.ls) if e.kind == "n" else e.t for e in self.queue(w)]

    def _trim(self, w: str) -> None:
        q = self.queue(w)
        del q[: max(0, len(q) - CAP)]

    def append_notice(self, w: str, target: str, last_seen: int) -> None:
        """One entry per pair: identical is a no-op, otherwise the old entry is replaced at the end."""
        q = self.queue(w)
        old = [e for e in q if e.kind == "n" and e.t == target]
        if old and old[0].ls == last_seen:
            return
        if old:
            q.remove(old[0])
        q.append(Ent("n", target, last_seen))
        self._trim(w)

    def append_generic(self, w: str, text: str) -> None:
        self.queue(w).append(Ent("g", text))
        self._trim(w)

    def remove_notice(self, w: str, t: str) -> None:
        self.queues[w] = [e for e in self.queue(w) if not (e.kind == "n" and e.t == t)]

    def drop_cursor(self, pair: tuple[str, str]) -> None:
        del self.cursors[pair]
        self.remove_notice(*pair)

    # -- recording -------------------------------------------------------------------------------
    def record(self, key: str, kind: str, now: int, actor: str | None = None, producers: tuple[str, ...] = ()) -> int:
        assert self.fresh, f"expected a {kind} event for {key}, the log has none"
        ev = self.fresh.pop(0)
        assert (ev["sessionKey"], ev["kind"]) == (key, kind), (ev, key, kind)
        seq: int = ev["sequence"]
        self.events.append((seq, key, kind, now))
        self.heads[key] = seq
        watchers = [w for w in dict.fromkeys(producers) if w and w != key]
        if kind == "child_spawned":
            for w in watchers:
                c = self.cursors.get((w, key))
                if c is None:
                    self.cursors[(w, key)] = Cur(seq, seq, seq, "explicit", now, next(self.rows))
                else:
                    c.last_seen = c.notified = c.material = seq
                    c.updated_at = now
                self.mutes.discard((w, key))
        elif kind in NOTIFY:
            moved: list[str] = []
            for w in watchers:
                if w == actor or (w, key) in self.mutes:
                    continue
                c = self.cursors.get((w, key))
                if c is None:
                    self.cursors[(w, key)] = Cur(0, seq, seq, "explicit", now, next(self.rows))
                else:
                    self._material(c, seq, now)
                moved.append(w)
            for (w, t), c in sorted(self.cursors.items()):
                if t == key and w != actor and w not in moved:
                    self._material(c, seq, now)
                    moved.append(w)
            for w in moved:
                self.append_notice(w, key, self.cursors[(w, key)].last_seen)
        # (the hourly prune a recording finds due runs on the timer, off the recording path: this
        # machine's injected clock never runs it)
        return seq

    @staticmethod
    def _material(c: Cur, seq: int, now: int) -> None:
        if c.notified == c.last_seen:
            c.notified = seq
        c.material = seq
        c.updated_at = now

    def register(self, w: str, t: str, provenance: str, now: int) -> bool:
        if w == t:
            return False
        if provenance != "explicit" and (w, t) in self.mutes:
            return False
        if provenance == "explicit":
            self.mutes.discard((w, t))
        c = self.cursors.get((w, t))
        if c is not None:
            if provenance == "explicit":
                c.provenance = "explicit"
            return True
        h = self.heads.get(t, 0)
        self.cursors[(w, t)] = Cur(h, h, h, provenance, now, next(self.rows))
        return True

    # -- drain, sweep, prune ---------------------------------------------------------------------
    def drain(self, w: str, now: int) -> list[str]:
        out = self.texts(w)
        self.ack(w, list(self.queue(w)), now)
        return out

    def ack(self, w: str, entries: list[Ent], now: int) -> int:
        """Remove these entries (those still queued) and acknowledge their notices, as a drain does."""
        taken = [e for e in self.queue(w) if any(e is x for x in entries)]
        self.queues[w] = [e for e in self.queue(w) if not any(e is x for x in taken)]
        targets = list(dict.fromkeys(e.t for e in taken if e.kind == "n"))
        for t in targets:
            c = self.cursors.get((w, t))
            if c is None:
                continue
            c.last_seen, c.notified = c.notified, max(c.material, c.notified)
            c.updated_at = now
            if c.material > c.last_seen:
                self.append_notice(w, t, c.last_seen)
        if taken:  # something was taken: what the cap evicted is queued again, as room allows (issue 19)
            have = {e.t for e in self.queue(w) if e.kind == "n"}
            lagging = sorted(
                ((c.updated_at, t) for (cw, t), c in self.cursors.items() if cw == w and c.material > c.last_seen),
            )
            for _, t in [p for p in lagging if p[1] not in have][: CAP - len(self.queue(w))]:
                self.append_notice(w, t, self.cursors[(w, t)].last_seen)
        return len(taken)

    def reconcile(self, w: str, t: str, after: int, last: int, now: int) -> None:
        """w read t's changes (after, last]: a read from at or before its cursor acknowledges them."""
        c = self.cursors.get((w, t))
        if c is None or after > c.last_seen or last <= c.last_seen:
            return
        c.updated_at = now
        if c.material > last:  # notify-eligible events beyond the page: one notice, quoting the new position
            c.last_seen, c.notified = last, c.material
            self.append_notice(w, t, last)
        else:
            c.last_seen = c.notified = c.material = last
            self.remove_notice(w, t)

    def sweep(self, now: int) -> None:
        rows = sorted(p for p, c in self.cursors.items() if c.material > c.last_seen and p[0] in self.sessions)
        for p in rows:
            c = self.cursors[p]
            c.notified = c.material
            c.updated_at = now
        for w, t in rows:
            self.append_notice(w, t, self.cursors[(w, t)].last_seen)
        self.prune(now, cursors=False)  # the open-time prune leaves stale cursors to the hourly one

    def prune(self, now: int, *, cursors: bool = True) -> None:
        self.next_prune_at = now + HOUR
        cutoff = now - RETENTION
        gone = [e for e in self.events if e[3] < cutoff]
        kept = [e for e in self.events if e[3] >= cutoff]
        if len(kept) > MAX_EVENTS:
            gone += kept[: len(kept) - MAX_EVENTS]
            kept = kept[len(kept) - MAX_EVENTS :]
        for seq, key, _, _ in gone:
            self.pruned[key] = max(self.pruned.get(key, 0), seq)
        self.events = kept
        for p in [p for p, c in self.cursors.items() if cursors and c.updated_at < cutoff]:
            self.drop_cursor(p)


class WatchMachine(RuleBasedStateMachine):
    suite: SuiteBase  # set by the test: whose stores the machine runs on

    def __init__(self) -> None:
        super().__init__()
        self.stack = contextlib.ExitStack()
        self.stores = Stores(self.suite, self.stack)  # a new, empty store per run
        self.clock = ManualClock()
        self.settings = Settings(max_events=MAX_EVENTS)
        self.gw = Gateway(self.stores.open(), clock=self.clock, settings=self.settings)
        self.model = Model()
        self.model.next_prune_at = self.clock() + HOUR  # the open-time prune
        self.seen = 0  # highest sequence already matched
        self.runs = itertools.count(1)
        self.noise_ids = itertools.count(1)
        self.prev_heads: dict[str, int] = {}
        self.prev_cursors: dict[tuple[str, str, int], tuple[int, int, int]] = {}
        self.peeked: tuple[str, list[tuple[int, Ent]]] | None = None  # a client's earlier peek
        for key in FIXED:
            self.gw.put_session(key)
            self.model.sessions[key] = Sess(None, "group" if key == GROUP else "other")

    def teardown(self) -> None:
        self.gw.close()
        self.stack.close()

    # -- helpers ---------------------------------------------------------------------------------
    def _collect(self) -> None:
        """New real events since the last step, for the model to match in order."""
        page = self.gw.events_after(self.seen, 1000)
        self.model.fresh = page
        if page:
            self.seen = page[-1]["sequence"]

    def _done(self) -> None:
        assert self.model.fresh == [], f"unexpected events: {self.model.fresh}"

    def _exists(self, key: str) -> bool:
        return key in self.model.sessions

    # -- rules -----------------------------------------------------------------------------------
    @rule(parent=st.sampled_from(PARENTS), child=st.sampled_from(CHILDREN), fresh=st.booleans(), own=st.booleans())
    def spawn(self, parent: str, child: str, fresh: bool, own: bool) -> None:
        m, now = self.model, self.clock()
        s = m.sessions.get(child)
        if own and s is not None and s.spawned_by:  # mostly re-spawn by the real parent (re-seeding)
            parent = s.spawned_by
        run = s.active_run if (s is not None and not fresh and s.active_run) else f"run-{next(self.runs)}"
        out = self.gw.call_tool("sessions_spawn", {"sessionKey": child, "runId": run}, caller=parent)
        self._collect()
        if s is not None and s.spawned_by != parent:
            assert out["error"]["code"] == "conflict"
            self._done()
            return
        assert "error" not in out, out
        if s is None:
            s = m.sessions[child] = Sess(parent, "subagent")
            m.record(child, "created", now)
        if s.active_run != run:
            s.active_run = run
            m.record(child, "child_spawned", now, parent, (parent,))
        self._done()
        assert out["stateVersion"] == m.heads.get(child, 0)

    @rule(child=st.sampled_from(CHILDREN))
    def respawn(self, child: str) -> None:
        """A new run by the child's own parent: re-seeds its cursor while a notice may be queued."""
        s = self.model.sessions.get(child)
        if s is not None and s.spawned_by:
            self.spawn(s.spawned_by, child, fresh=True, own=True)

    @rule(child=st.sampled_from(CHILDREN))
    def child_turn(self, child: str) -> None:
        self.human_turn(child)

    @rule(rounds=st.integers(1, 3))
    def busy_period(self, rounds: int) -> None:
        """People typing everywhere: several targets of one watcher move on before its next drain."""
        for _ in range(rounds):
            for key in CHILDREN + [GROUP, DM]:
                self.human_turn(key)

    @rule(caller=st.sampled_from(EVERYONE), other=st.sampled_from(EVERYONE))
    def send_watch(self, caller: str, other: str) -> None:
        target = other
        out = self.gw.call_tool("sessions_send", {"sessionKey": target, "message": "hi", "watch": True}, caller=caller)
        self._collect()
        if not (self._exists(caller) and self._exists(target)):
            assert out["error"]["code"] == "not_found" and "watched" not in out
        else:
            assert out["watched"] is self.model.register(caller, target, "explicit", self.clock())
        self._done()

    @rule(key=st.sampled_from(CHILDREN + [DM, GROUP]))
    def human_turn(self, key: str) -> None:
        m, now = self.model, self.clock()
        if not self._exists(key):
            return
        out = self.gw.inbound(key, "typed by a person", channel="telegram")
        self._collect()
        s = m.sessions[key]
        if s.kind == "group":
            m.register(MAIN, key, "ambient-group", now)
        watched = s.spawned_by is not None or any(t == key for _, t in m.cursors)
        assert out["recorded"] is watched
        if watched:
            m.record(key, "human_direct_message", now, None, (s.spawned_by,) if s.spawned_by else ())
        self._done()

    @rule(
        key=st.sampled_from(CHILDREN + [DM, GROUP]),
        how=st.sampled_from(
            [
                {"provenance": "inter_session", "source_session_key": P1},
                {"provenance": "internal_system"},
                {"lane": "subagent"},
            ]
        ),
    )
    def non_human_turn(self, key: str, how: dict[str, str]) -> None:
        if not self._exists(key):
            return
        out = self.gw.inbound(key, "not a person", channel="internal", **how)
        self._collect()
        assert out["recorded"] is False
        self._done()

    @rule(
        key=st.sampled_from(EVERYONE),
        action=st.sampled_from(["create", "edit", "status", "clear"]),
        actor=st.sampled_from([None, "human", *EVERYONE]),
    )
    def goal(self, key: str, action: str, actor: str | None) -> None:
        m, now = self.model, self.clock()
        if not self._exists(key):
            return
        who = (
            None
            if actor is None
            else ({"type": "human", "id": "ann"} if actor == "human" else {"type": "agent", "id": actor})
        )
        agent_actor = actor if actor not in (None, "human") else None
        before_queue = self.gw.peek_system_events(agent_actor) if agent_actor else []
        before_cursor = self.gw.cursors(watcher=agent_actor, target=key) if agent_actor else []
        s = m.sessions[key]
        kw = {"objective": "o"} if action in ("create", "edit") else {"status": "done"} if action == "status" else {}
        try:
            out = self.gw.set_goal(key, action, actor=who, **kw)
        except SessionwatchError as exc:
            assert action in ("edit", "status") and not s.goal and exc.code == "invalid_argument"
            self._collect()
            self._done()
            return
        self._collect()
        s.goal = action != "clear"
        assert out["recorded"] is True
        m.record(key, "goal_changed", now, agent_actor, (s.spawned_by,) if s.spawned_by else ())
        self._done()
        if agent_actor:  # self-suppression: nothing new for the actor about its own change
            after_queue = self.gw.peek_system_events(agent_actor)
            assert all(e in before_queue for e in after_queue)
            after_cursor = self.gw.cursors(watcher=agent_actor, target=key)
            assert after_cursor in (before_cursor, [])

    @rule(child=st.sampled_from(CHILDREN), status=st.sampled_from(["ok", "error", "timeout", "cancelled"]))
    def end_run(self, child: str, status: str) -> None:
        m, now = self.model, self.clock()
        s = m.sessions.get(child)
        if s is None or s.active_run is None:
            return
        out = self.gw.end_run(child, s.active_run, status)
        self._collect()
        assert out["recorded"] is True
        s.active_run = None
        m.record(child, "run_completed" if status == "ok" else "run_failed", now)
        self._done()

    @rule(key=st.sampled_from(EVERYONE))
    def drain(self, key: str) -> None:
        if not self._exists(key):
            return
        got = [e["text"] for e in self.gw.drain_system_events(key)]
        self._collect()
        assert got == self.model.drain(key, self.clock())
        self._done()

    @rule(key=st.sampled_from(EVERYONE))
    def peek(self, key: str) -> None:
        """A client takes the queue with its ids; it acknowledges them later (maybe after other steps)."""
        if not self._exists(key):
            return
        real = self.gw.peek_system_events(key)
        assert [e["text"] for e in real] == self.model.texts(key)
        self.peeked = (key, [(e["id"], m) for e, m in zip(real, self.model.queue(key), strict=True)])

    @rule(data=st.data())
    def ack_peeked(self, data: st.DataObject) -> None:
        if self.peeked is None:
            return
        key, pairs = self.peeked
        chosen = data.draw(st.lists(st.sampled_from(pairs), unique_by=lambda p: p[0])) if pairs else []
        out = self.gw.ack_system_events(key, [i for i, _ in chosen])
        self._collect()
        assert out == {"acknowledged": self.model.ack(key, [e for _, e in chosen], self.clock())}
        self._done()

    @rule(
        caller=st.sampled_from(EVERYONE),
        other=st.sampled_from(EVERYONE),
        pick=st.sampled_from(["zero", "seen", "after", "head"]),
    )
    def read_changes(self, caller: str, other: str, pick: str) -> None:
        """session_status with changesSince: a watcher's read acknowledges what it returned."""
        m, target = self.model, other
        if not self._exists(target):
            return
        c = m.cursors.get((caller, target))
        base = c.last_seen if c is not None else 0
        since = {"zero": 0, "seen": base, "after": base + 1, "head": m.heads.get(target, 0)}[pick]
        out = self.gw.call_tool("session_status", {"sessionKey": target, "changesSince": since}, caller=caller)
        assert "error" not in out, out
        got = [e["sequence"] for e in out["stateChanges"]["events"]]
        assert got == [seq for seq, k, _, _ in m.events if k == target and seq > since]
        if got:
            m.reconcile(caller, target, since, got[-1], self.clock())

    @rule(key=st.sampled_from(FIXED), count=st.integers(1, 12))
    def noise(self, key: str, count: int) -> None:
        """Other system events (cron and the like) filling the queue, so the 20-entry cap bites."""
        for _ in range(count):
            text = f"cron tick {next(self.noise_ids)}"
            self.gw.enqueue_system_event(key, text, context_key="cron:tick")
            self.model.append_generic(key, text)

    @rule(key=st.sampled_from(EVERYONE))
    def reset(self, key: str) -> None:
        if not self._exists(key):
            return
        self.gw.reset_session(key)
        self._collect()
        m = self.model
        m.sessions[key].active_run = None
        for p in [p for p in m.cursors if p[0] == key]:
            m.drop_cursor(p)
        self._done()

    @rule(caller=st.sampled_from(EVERYONE), other=st.sampled_from(EVERYONE))
    def unwatch(self, caller: str, other: str) -> None:
        target = other
        out = self.gw.call_tool("session_unwatch", {"sessionKey": target}, caller=caller)
        m = self.model
        if not (self._exists(caller) and self._exists(target)):
            assert out["error"]["code"] == "not_found"
            return
        had = (caller, target) in m.cursors
        assert out["unwatched"] is had
        if had:
            m.drop_cursor((caller, target))
        m.mutes.add((caller, target))

    @rule()
    def restart(self) -> None:
        self.gw.close()
        self.gw = Gateway(self.stores.open(), clock=self.clock, settings=self.settings)
        self.model.sweep(self.clock())

    @rule()
    def prune(self) -> None:
        self.gw.prune(force=True)
        self.model.prune(self.clock())

    @rule(ms=st.sampled_from([SECOND, 30 * SECOND, HOUR, 10 * DAY, 31 * DAY]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    # -- checks ----------------------------------------------------------------------------------
    @invariant()
    def matches_the_model(self) -> None:
        m = self.model
        real = {(c["watcher"], c["target"]): c for c in self.gw.cursors()}
        want = {
            p: {
                "watcher": p[0],
                "target": p[1],
                "lastSeen": c.last_seen,
                "notified": c.notified,
                "material": c.material,
                "provenance": c.provenance,
                "updatedAt": c.updated_at,
            }
            for p, c in m.cursors.items()
        }
        assert real == want
        for key in m.sessions:
            assert [e["text"] for e in self.gw.peek_system_events(key)] == m.texts(key), key
            assert self.gw.state_version(key) == m.heads.get(key, 0), key
            page = self.gw.changes_since(key, 0)
            retained = [seq for seq, k, _, _ in m.events if k == key]
            assert [e["sequence"] for e in page.events] == retained
            assert page.history_gap is (m.pruned.get(key, 0) > 0), key
            head = m.heads.get(key, 0)
            assert page.earliest_available_sequence == (retained[0] if retained else head + 1 if head else 0)
        assert [e["sequence"] for e in self.gw.events_after(0, 1000)] == [seq for seq, *_ in m.events]

    @invariant()
    def watch_invariants(self) -> None:
        queues = {key: self.gw.peek_system_events(key) for key in self.model.sessions}
        cursors = self.gw.cursors()
        for c in cursors:
            w, t = c["watcher"], c["target"]
            marks = (c["lastSeen"], c["notified"], c["material"])
            assert c["material"] >= c["notified"] >= c["lastSeen"], c
            entries = [e for e in queues.get(w, []) if e["contextKey"] == ctx(t)]
            assert len(entries) <= 1, entries  # never two notices for one pair
            if c["notified"] != c["lastSeen"]:  # lagging: exactly one notice, quoting lastSeen ...
                if entries:
                    assert entries[0]["text"] == notice(t, c["lastSeen"])
                else:  # ... unless the 20-entry cap evicted it
                    assert not any(e.kind == "n" and e.t == t and e.ls == c["lastSeen"] for e in self.model.queue(w))
            model_row = self.model.cursors.get((w, t))
            before = self.prev_cursors.get((w, t, model_row.row if model_row else -1))
            if before is not None:  # a cursor never moves backwards while it exists
                assert all(now >= then for now, then in zip(marks, before, strict=True)), (before, c)
        heads = {key: self.gw.state_version(key) for key in self.model.sessions}
        for key, h in heads.items():
            assert h >= self.prev_heads.get(key, 0), key  # heads never decrease
        self.prev_heads = heads
        rows = {p: c.row for p, c in self.model.cursors.items()}
        self.prev_cursors = {
            (c["watcher"], c["target"], rows.get((c["watcher"], c["target"]), -1)): (
                c["lastSeen"],
                c["notified"],
                c["material"],
            )
            for c in cursors
        }


class StatefulTests(SuiteBase):
    """A random-walk check of the watch machinery against a small reference model."""

    @pytest.mark.slow
    def test_watch_machine_matches_the_model(self) -> None:
        machine = type(f"WatchMachine_{type(self).__name__}", (WatchMachine,), {"suite": self})
        examples = int(os.environ.get("SESSIONWATCH_STATEFUL_EXAMPLES", str(self.stateful_examples)))
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=50,
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
