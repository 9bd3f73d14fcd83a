"""The durable system-event queue: cap, dedupe, durability, drain lines and what a drain acknowledges."""

from __future__ import annotations

import random

import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, ctx, human, marks, notice, spawn, texts
from .suite import SuiteBase


class QueueTests(SuiteBase):
    """The durable system-event queue: cap, dedupe, durability, drain lines and what a drain acknowledges."""

    def test_queue_is_capped_at_20_and_evicts_the_oldest(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        for i in range(25):
            assert gw.enqueue_system_event(MAIN, f"event {i}")["queued"] is True
        assert texts(gw, MAIN) == [f"event {i}" for i in range(5, 25)]
        ids = [e["id"] for e in gw.peek_system_events(MAIN)]
        assert ids == sorted(ids) and len(set(ids)) == 20

    def test_notices_count_against_the_cap(self, family: Gateway) -> None:
        gw = family
        for i in range(19):
            gw.enqueue_system_event(MAIN, f"event {i}")
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        assert len(texts(gw, MAIN)) == 20 and texts(gw, MAIN)[-1] == notice(CHILD, spawned)
        gw.enqueue_system_event(MAIN, "event 19")
        assert texts(gw, MAIN)[0] == "event 1" and texts(gw, MAIN)[-2:] == [notice(CHILD, spawned), "event 19"]

    def test_a_notice_the_cap_evicted_is_back_after_the_next_drain(self, family: Gateway) -> None:
        """20 ordinary entries evict a pending stale notice; the drain that takes them queues it again, so
        the next turn is told (issue 19). Before, only a restart's sweep brought it back."""
        gw = family
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        for i in range(20):
            gw.enqueue_system_event(MAIN, f"event {i}")
        assert notice(CHILD, spawned) not in texts(gw, MAIN)
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == [f"event {i}" for i in range(20)]
        assert texts(gw, MAIN) == [notice(CHILD, spawned)]
        # The same through peek + acknowledgment by id (the HTTP drain, MCP and the hooks).
        gw.drain_system_events(MAIN)
        human(gw, CHILD)
        seen = marks(gw, MAIN, CHILD)
        assert seen is not None
        for i in range(20):
            gw.enqueue_system_event(MAIN, f"again {i}")
        ids = [e["id"] for e in gw.peek_system_events(MAIN)]
        assert gw.ack_system_events(MAIN, ids) == {"acknowledged": 20}
        assert texts(gw, MAIN) == [notice(CHILD, seen[0])]

    def test_a_notice_the_cap_evicted_is_back_after_a_drain_of_a_queue_no_longer_full(self, gw: Gateway) -> None:
        """The cap evicts a pending stale notice, then the queue shrinks another way (an unwatch withdraws
        another notice; an acknowledgment takes a few entries by id), so the next drain takes less than a
        full queue: the evicted notice is still back in the queue after it (issue 19: no later than the
        watcher's next drain, whatever emptied the queue meanwhile)."""
        one, two = "agent:a:one", "agent:a:two"
        gw.put_session(MAIN)
        for t in (one, two):
            gw.put_session(t)
            assert gw.watch(MAIN, t)
        seen = gw.state_version(one)
        human(gw, one)
        human(gw, two)
        for i in range(19):
            gw.enqueue_system_event(MAIN, f"event {i}")
        assert notice(one, seen) not in texts(gw, MAIN) and len(texts(gw, MAIN)) == 20  # evicted by the cap
        assert gw.unwatch(MAIN, two)  # its notice leaves: 19 entries, no longer a full queue
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == [f"event {i}" for i in range(19)]
        assert texts(gw, MAIN) == [notice(one, seen)]
        gw.drain_system_events(MAIN)
        # The same when the entries leave by an acknowledgment of a few of them, by id.
        seen = gw.state_version(one)
        human(gw, one)
        for i in range(20):
            gw.enqueue_system_event(MAIN, f"again {i}")
        first = [e["id"] for e in gw.peek_system_events(MAIN)][:3]
        assert gw.ack_system_events(MAIN, first) == {"acknowledged": 3}
        assert texts(gw, MAIN) == [*(f"again {i}" for i in range(3, 20)), notice(one, seen)]

    def test_dedupe_is_by_context_key_and_exact_text(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        assert gw.enqueue_system_event(MAIN, "tick", context_key="cron:a")["queued"] is True
        assert gw.enqueue_system_event(MAIN, "tick", context_key="cron:a") == {"queued": False, "entry": None}
        assert gw.enqueue_system_event(MAIN, "tick", context_key="CRON:A")["queued"] is False  # keys are lower-cased
        assert gw.enqueue_system_event(MAIN, "tick", context_key="cron:b")["queued"] is True
        assert gw.enqueue_system_event(MAIN, "tick ", context_key="cron:a")["queued"] is True
        assert gw.enqueue_system_event(MAIN, "tick")["queued"] is True
        assert gw.enqueue_system_event(MAIN, "tick")["queued"] is False
        assert [(e["text"], e["contextKey"]) for e in gw.peek_system_events(MAIN)] == [
            ("tick", "cron:a"),
            ("tick", "cron:b"),
            ("tick ", "cron:a"),
            ("tick", None),
        ]

    def test_a_hand_queued_copy_of_a_pending_notice_is_deduped(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        out = gw.enqueue_system_event(MAIN, notice(CHILD, spawned), context_key=ctx(CHILD))
        assert out["queued"] is False
        assert texts(gw, MAIN) == [notice(CHILD, spawned)]

    def test_entries_are_per_session(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        gw.put_session("agent:a:other")
        gw.enqueue_system_event(MAIN, "for main")
        assert texts(gw, "agent:a:other") == []
        assert gw.drain_system_events("agent:a:other") == []
        assert texts(gw, MAIN) == ["for main"]

    def test_a_notice_survives_a_restart_exactly_once(self, clock: ManualClock) -> None:
        with self.open_gateway(clock=clock) as gw:
            gw.put_session(MAIN)
            spawned = spawn(gw, MAIN, "kid")["stateVersion"]
            human(gw, CHILD)
            gw.enqueue_system_event(MAIN, "cron: backup done", context_key="cron:backup")
            before = gw.peek_system_events(MAIN)
        with self.open_gateway(clock=clock) as gw:
            assert gw.peek_system_events(MAIN) == before
            assert texts(gw, MAIN) == [notice(CHILD, spawned), "cron: backup done"]
        with self.open_gateway(clock=clock) as gw:
            assert texts(gw, MAIN) == [notice(CHILD, spawned), "cron: backup done"]
            drained = gw.drain_system_events(MAIN)
            assert len(drained) == 2

    def test_drain_returns_system_lines_and_empties_the_queue(self, family: Gateway, clock: ManualClock) -> None:
        gw = family
        clock.now = 1_800_000_000_123
        spawned = gw.state_version(CHILD)
        human(gw, CHILD)
        clock.advance(1000)
        gw.enqueue_system_event(MAIN, "line one\nline two", context_key="exec:1")
        peeked = gw.peek_system_events(MAIN)
        drained = gw.drain_system_events(MAIN)
        assert drained == peeked
        assert [set(e) for e in drained] == [{"id", "text", "ts", "contextKey", "line"}] * 2
        assert drained[0]["ts"] == 1_800_000_000_123 and drained[0]["contextKey"] == ctx(CHILD)
        assert drained[0]["line"] == f"System: [2027-01-15T08:00:00.123Z] {notice(CHILD, spawned)}"
        assert drained[1]["line"] == "System: [2027-01-15T08:00:01.123Z] line one\nSystem: line two"
        assert gw.peek_system_events(MAIN) == [] and gw.drain_system_events(MAIN) == []

    def test_peek_acknowledges_nothing(self, family: Gateway) -> None:
        gw = family
        human(gw, CHILD)
        before = marks(gw, MAIN, CHILD)
        gw.peek_system_events(MAIN)
        gw.peek_system_events(MAIN)
        assert marks(gw, MAIN, CHILD) == before

    @pytest.mark.parametrize(
        "entry",
        [
            ("cron: nightly", "cron:nightly"),
            ("odd", "session-state:zz"),
            ("odd", "session-state:abc"),
            ("odd", "session-state:ff"),
            ("nul", "session-state:00"),  # a NUL target: no session key holds one (and PostgreSQL text cannot)
            ("no key", None),
        ],
    )
    def test_only_valid_session_state_keys_acknowledge(self, family: Gateway, entry: tuple[str, str | None]) -> None:
        gw = family
        human(gw, CHILD)
        for i in range(20):  # evict the real notice; the cursor stays lagging
            gw.enqueue_system_event(MAIN, f"filler {i}", context_key="filler")
        lagging = marks(gw, MAIN, CHILD)
        assert lagging is not None and lagging[0] != lagging[1]
        gw.drain_system_events(MAIN)
        # The drain that took the full queue queued the evicted notice again (issue 19); the entry under
        # test is acknowledged on its own, by id, so only its key can move the cursor.
        assert texts(gw, MAIN) == [notice(CHILD, lagging[0])]
        made = gw.enqueue_system_event(MAIN, entry[0], context_key=entry[1])["entry"]
        assert gw.ack_system_events(MAIN, [made["id"]]) == {"acknowledged": 1}
        assert marks(gw, MAIN, CHILD) == lagging
        assert texts(gw, MAIN) == [notice(CHILD, lagging[0])]

    @staticmethod
    def _evicted_change(gw: Gateway) -> int:
        """A human change on CHILD whose notice to MAIN 20 filler lines evicted before a drain: MAIN lags
        on CHILD, and the drain queued the evicted notice again. Returns the change's sequence."""
        seq = int(human(gw, CHILD)["event"]["sequence"])
        for i in range(20):
            gw.enqueue_system_event(MAIN, f"filler {i}", context_key="filler")
        gw.drain_system_events(MAIN)
        return seq

    def test_a_valid_session_state_key_acknowledges_its_target(self, family: Gateway) -> None:
        gw = family
        seq = self._evicted_change(gw)
        gw.enqueue_system_event(MAIN, "hand-made", context_key=ctx(CHILD).upper())
        gw.drain_system_events(MAIN)
        assert marks(gw, MAIN, CHILD) == (seq, seq, seq)

    def test_acknowledging_a_hand_made_entry_by_id_acknowledges_its_target(self, family: Gateway) -> None:
        """As the drain above, by id: only the entry acknowledged counts, and its key names the target."""
        gw = family
        seq = self._evicted_change(gw)
        lagging = marks(gw, MAIN, CHILD)
        odd = gw.enqueue_system_event(MAIN, "odd", context_key="session-state:abc")["entry"]["id"]
        made = gw.enqueue_system_event(MAIN, "hand-made", context_key=ctx(CHILD).upper())["entry"]["id"]
        assert gw.ack_system_events(MAIN, [odd]) == {"acknowledged": 1}
        assert marks(gw, MAIN, CHILD) == lagging
        assert gw.ack_system_events(MAIN, [made]) == {"acknowledged": 1}
        assert marks(gw, MAIN, CHILD) == (seq, seq, seq)

    def test_a_replaced_notice_does_not_evict_an_older_entry(self, family: Gateway) -> None:
        """One entry per pair: a notice quoting a newer last_seen replaces the pair's old entry in place of
        appending a second one, and the queue keeps every other entry."""
        gw = family
        gw.enqueue_system_event(MAIN, "g0")
        human(gw, CHILD)
        for i in range(2, 20):
            gw.enqueue_system_event(MAIN, f"g{i}")
        assert len(texts(gw, MAIN)) == 20
        reseeded = spawn(gw, MAIN, "kid", run_id="run-2")["stateVersion"]  # the old notice stays queued
        human(gw, CHILD)
        assert texts(gw, MAIN) == ["g0"] + [f"g{i}" for i in range(2, 20)] + [notice(CHILD, reseeded)]

    def test_acknowledge_without_consuming_then_new_material(self, family: Gateway) -> None:
        gw = family
        gw.enqueue_system_event(MAIN, "g0")
        seq = human(gw, CHILD)["event"]["sequence"]
        for i in range(2, 20):
            gw.enqueue_system_event(MAIN, f"g{i}")
        gw.acknowledge(MAIN, [CHILD])  # nothing newer: no reopen, the old entry is still queued
        assert marks(gw, MAIN, CHILD) == (seq, seq, seq)
        human(gw, CHILD)
        assert texts(gw, MAIN) == ["g0"] + [f"g{i}" for i in range(2, 20)] + [notice(CHILD, seq)]

    def test_compaction_keeps_every_live_notice_of_a_wide_watcher(self, gw: Gateway) -> None:
        """A watcher of many targets: removals from the middle renumber the queue, then more appends than the
        cap follow. The queue must stay exactly what an eager capped list holds (no live notice lost, none
        revived), whichever way the store finds the live notices."""
        gw.put_session(MAIN)
        targets = [f"agent:a:t{i}" for i in range(40)]
        for t in targets:
            gw.put_session(t)
            assert gw.watch(MAIN, t)
        model: list[str] = []  # the queue an eager capped list would hold, oldest first

        def push(text: str) -> None:
            model.append(text)
            del model[:-20]

        noticed: dict[str, int] = {}  # target -> the last_seen its notice quotes
        taken: set[str] = set()  # notices acknowledged by id

        def material(t: str) -> None:
            seen = gw.state_version(t)
            human(gw, t)
            noticed[t] = seen
            push(notice(t, seen))

        def ack(*texts_to_take: str) -> None:
            entries = gw.peek_system_events(MAIN)
            ids = [e["id"] for e in entries if e["text"] in texts_to_take]
            assert gw.ack_system_events(MAIN, ids) == {"acknowledged": len(texts_to_take)}
            for text in texts_to_take:
                model.remove(text)
                taken.add(text)
            # Entries were taken: the notices the cap evicted come back, as room allows (issue 19), oldest
            # change first (the clock stands still here, so by target).
            evicted = sorted((t, n) for t, seen in noticed.items() if (n := notice(t, seen)) not in {*model, *taken})
            for _, text in evicted[: 20 - len(model)]:
                push(text)

        for t in targets[:20]:
            material(t)
        assert texts(gw, MAIN) == model
        ack(model[-1])  # the newest: every older notice moves up one index
        material(targets[20])
        assert texts(gw, MAIN) == model  # the oldest notice, renumbered above later pushes, is still there
        ack(model[5], model[10])
        for i in range(3):
            gw.enqueue_system_event(MAIN, f"tick {i}")
            push(f"tick {i}")
            assert texts(gw, MAIN) == model
        for t in targets[21:36]:
            material(t)
            assert texts(gw, MAIN) == model
        ack(model[0], model[7])
        for t in targets[36:]:
            material(t)
            assert texts(gw, MAIN) == model
        pushed = list(model)
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == model
        # The drain took a full queue: the notices the cap evicted (never acknowledged) are queued again.
        evicted = {notice(t, seen) for t, seen in noticed.items()} - set(pushed) - taken
        back = texts(gw, MAIN)
        assert len(back) == min(20, len(evicted)) and set(back) <= evicted

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_queue_of_a_wide_watcher_matches_an_eager_list_under_reappends_drains_and_unwatches(
        self, gw: Gateway, seed: int
    ) -> None:
        """Random material on many targets (a notice evicted unconsumed is queued again, quoting the same
        watermark; one consumed is reopened when material moved on), generic entries that evict notices,
        drains, acks of single entries and unwatch/rewatch: after every step the queue is exactly what an
        eager capped list holds, however the store finds its live notices."""
        rng = random.Random(seed)
        gw.put_session(MAIN)
        targets = [f"agent:a:t{i}" for i in range(30)]
        last_seen: dict[str, int] = {}  # the watcher's watermarks, per target (see store.base: ack)
        notified: dict[str, int] = {}
        material: dict[str, int] = {}

        def watch(t: str) -> None:
            assert gw.watch(MAIN, t)
            last_seen[t] = notified[t] = material[t] = gw.state_version(t)

        for t in targets:
            gw.put_session(t)
            watch(t)
        model: list[str] = []  # oldest first
        queued: dict[str, str] = {}  # target -> the text of its notice while it is in the model

        def push(text: str, target: str | None = None) -> None:
            model.append(text)
            if target is not None:
                queued[target] = text
            for gone in model[:-20]:
                queued.pop(next((t for t, x in queued.items() if x == gone), ""), None)
            del model[:-20]

        def consumed(t: str) -> None:
            last_seen[t], notified[t] = notified[t], max(material[t], notified[t])
            if material[t] > last_seen[t]:  # material moved on after the notice froze: one reopen
                push(notice(t, last_seen[t]), t)

        def requeue() -> None:  # entries were taken: what the cap evicted is queued again, as room allows
            lagging = sorted(t for t in targets if material[t] > last_seen[t] and t not in queued)
            for t in lagging[: 20 - len(model)]:
                push(notice(t, last_seen[t]), t)

        generic = 0
        for step in range(160):
            roll = rng.random()
            if roll < 0.6:
                t = rng.choice(targets[:12] if rng.random() < 0.7 else targets)
                human(gw, t)
                seq = gw.state_version(t)
                if notified[t] == last_seen[t]:
                    notified[t] = seq
                material[t] = seq
                if t not in queued:
                    push(notice(t, last_seen[t]), t)
            elif roll < 0.75:
                gw.enqueue_system_event(MAIN, f"tick {generic}")
                push(f"tick {generic}")
                generic += 1
            elif roll < 0.85 and model:
                entry = rng.choice(gw.peek_system_events(MAIN))
                assert gw.ack_system_events(MAIN, [entry["id"]]) == {"acknowledged": 1}
                model.remove(entry["text"])
                owner = next((t for t, x in queued.items() if x == entry["text"]), None)
                if owner is not None:
                    del queued[owner]
                    consumed(owner)
                requeue()
            elif roll < 0.92:
                drained = [e["text"] for e in gw.drain_system_events(MAIN)]
                assert drained == model, f"step {step}"
                owners = [
                    next(t for t, x in queued.items() if x == text) for text in drained if text in queued.values()
                ]
                model.clear()
                queued.clear()
                for t in owners:
                    consumed(t)
                if drained:
                    requeue()
            else:
                t = rng.choice(targets[:12])
                assert gw.unwatch(MAIN, t)
                if t in queued:
                    model.remove(queued.pop(t))
                watch(t)
            assert texts(gw, MAIN) == model, f"step {step}"

    def test_deleting_a_target_keeps_the_older_and_newer_notices_of_its_watcher(self, gw: Gateway) -> None:
        """The deleted target's notice sat between two others in the watcher's queue: both stay, in order,
        and later appends still evict the oldest first."""
        gw.put_session(MAIN)
        a, b, c = "agent:a:ta", "agent:a:tb", "agent:a:tc"
        seen = {}
        for t in (a, b, c):
            gw.put_session(t)
            assert gw.watch(MAIN, t)
            seen[t] = gw.state_version(t)
        for t in (a, b, c):
            human(gw, t)
        assert texts(gw, MAIN) == [notice(a, seen[a]), notice(b, seen[b]), notice(c, seen[c])]
        gw.delete_session(b)
        assert texts(gw, MAIN) == [notice(a, seen[a]), notice(c, seen[c])]
        for i in range(18):
            gw.enqueue_system_event(MAIN, f"tick {i}")
        assert texts(gw, MAIN) == [notice(a, seen[a]), notice(c, seen[c])] + [f"tick {i}" for i in range(18)]
        gw.enqueue_system_event(MAIN, "tick 18")
        assert texts(gw, MAIN) == [notice(c, seen[c])] + [f"tick {i}" for i in range(19)]
