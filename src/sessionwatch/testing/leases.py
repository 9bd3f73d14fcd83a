"""Delivery leases: a delivery that may not reach its client holds its entries for a while, so concurrent
drains never hand out one entry twice and a holder that dies gives its entries back when the lease ends
(issue 19, item 3; docs/http.md "Delivery")."""

from __future__ import annotations

import threading
import time

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock

from .helpers import CHILD, MAIN, SECOND, human, marks, notice, texts
from .suite import SuiteBase

LEASE = 30 * SECOND


def ticks(gw: Gateway, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        gw.enqueue_system_event(MAIN, f"tick {i}")


def ids(entries: list[dict[str, object]]) -> list[object]:
    return [e["id"] for e in entries]


class LeaseTests(SuiteBase):
    """Delivery leases (``Gateway.deliver_system_events``)."""

    def test_two_leases_never_share_an_entry(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        ticks(gw, 3)
        first = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert [e["text"] for e in first.entries] == ["tick 0", "tick 1", "tick 2"]
        ticks(gw, 2, start=3)
        second = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert [e["text"] for e in second.entries] == ["tick 3", "tick 4"]  # only what the first does not hold
        assert gw.deliver_system_events(MAIN, lease_ms=LEASE).entries == []
        assert gw.drain_system_events(MAIN) == []  # a plain drain leaves leased entries alone too
        assert texts(gw, MAIN) == [f"tick {i}" for i in range(5)]  # a peek still shows them: still queued

    def test_acknowledging_a_lease_is_a_drain_of_its_entries(self, family: Gateway) -> None:
        gw = family
        spawned = gw.state_version(CHILD)
        first = human(gw, CHILD)["event"]["sequence"]
        gw.enqueue_system_event(MAIN, "tick")
        delivery = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert [e["text"] for e in delivery.entries] == [notice(CHILD, spawned), "tick"]
        last = human(gw, CHILD)["event"]["sequence"]  # material moves on while the answer is written
        assert delivery.renew() is True
        assert delivery.settle() is True
        assert marks(gw, MAIN, CHILD) == (first, last, last)
        assert texts(gw, MAIN) == [notice(CHILD, first)]  # exactly one reopen, as a drain gives
        reopened = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert [e["text"] for e in reopened.entries] == [notice(CHILD, first)]  # the reopen is not leased

    def test_a_released_lease_frees_its_entries_at_once(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        ticks(gw, 2)
        delivery = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        delivery.release()
        again = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert ids(again.entries) == ids(delivery.entries)  # the same entries, the same ids
        assert again.settle() is True and texts(gw, MAIN) == []

    def test_an_expired_lease_puts_its_entries_back(self, gw: Gateway, clock: ManualClock) -> None:
        """A holder that died (a gateway killed mid-answer) never settles: its entries come back."""
        gw.put_session(MAIN)
        ticks(gw, 2)
        dead = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        clock.advance(LEASE - 1)
        assert gw.deliver_system_events(MAIN, lease_ms=LEASE).entries == []
        assert gw.drain_system_events(MAIN) == []
        clock.advance(1)
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == ["tick 0", "tick 1"]
        assert ids(gw.peek_system_events(MAIN)) == [] and len(dead.entries) == 2

    def test_an_expired_lease_is_leased_again_by_another_process(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session(MAIN)
        ticks(gw, 2)
        dead = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        other = self.open_gateway(clock=clock, timers=False)  # a restarted gateway on the same store
        try:
            assert other.deliver_system_events(MAIN, lease_ms=LEASE).entries == []
            clock.advance(LEASE)
            taken = other.deliver_system_events(MAIN, lease_ms=LEASE)
            assert ids(taken.entries) == ids(dead.entries)
            assert taken.settle() is True
        finally:
            other.close()
        assert texts(gw, MAIN) == []

    def test_a_lease_taken_over_cannot_be_renewed_or_acknowledged(self, gw: Gateway, clock: ManualClock) -> None:
        """A holder slower than its lease must not complete its answer: another drain has the entries."""
        gw.put_session(MAIN)
        ticks(gw, 2)
        slow = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        clock.advance(LEASE + 1)
        fast = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert ids(fast.entries) == ids(slow.entries)
        assert slow.renew() is False
        assert slow.settle() is False
        assert texts(gw, MAIN) == ["tick 0", "tick 1"]  # nothing changed
        assert fast.renew() is True and fast.settle() is True
        assert texts(gw, MAIN) == []

    def test_an_expired_lease_no_one_took_still_settles(self, gw: Gateway, clock: ManualClock) -> None:
        gw.put_session(MAIN)
        ticks(gw, 1)
        slow = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        clock.advance(2 * LEASE)
        assert slow.renew() is True and slow.settle() is True
        assert texts(gw, MAIN) == []

    def test_an_entry_acknowledged_by_another_face_ends_the_lease(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        ticks(gw, 2)
        delivery = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        first = delivery.entries[0]["id"]
        assert gw.ack_system_events(MAIN, [first]) == {"acknowledged": 1}  # e.g. peek + ack by id elsewhere
        assert delivery.renew() is False  # answering again would deliver it twice
        assert delivery.settle() is False
        assert texts(gw, MAIN) == ["tick 1"]
        delivery.release()
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == ["tick 1"]

    def test_a_plain_drain_takes_the_entries_a_lease_does_not_hold(self, gw: Gateway) -> None:
        gw.put_session(MAIN)
        ticks(gw, 2)
        delivery = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        ticks(gw, 1, start=2)
        assert [e["text"] for e in gw.drain_system_events(MAIN)] == ["tick 2"]
        assert delivery.settle() is True and texts(gw, MAIN) == []

    def test_a_lease_on_an_empty_queue_changes_nothing(self, family: Gateway) -> None:
        gw = family
        delivery = gw.deliver_system_events(MAIN, lease_ms=LEASE)
        assert delivery.entries == [] and delivery.renew() is True and delivery.settle() is True
        delivery.release()
        human(gw, CHILD)
        assert len(gw.deliver_system_events(MAIN, lease_ms=LEASE).entries) == 1

    def test_concurrent_deliveries_hand_out_each_entry_once(self, gw: Gateway) -> None:
        """Four deliverers on their own store connections, while entries keep arriving."""
        gw.put_session(MAIN)
        total = 60
        got: list[object] = []
        lock = threading.Lock()
        done = threading.Event()
        gateways = [self.open_gateway(clock=gw.clock, timers=False) for _ in range(4)]

        def deliverer(g: Gateway) -> None:
            while True:
                finished = done.is_set()
                d = g.deliver_system_events(MAIN, lease_ms=LEASE)
                if d.settle():
                    with lock:
                        got.extend(ids(d.entries))
                if finished and not d.entries:
                    return

        threads = [threading.Thread(target=deliverer, args=(g,)) for g in gateways]
        try:
            for t in threads:
                t.start()
            for batch in range(total // 10):  # below the cap between drains: nothing is evicted
                for i in range(10):
                    gw.enqueue_system_event(MAIN, f"tick {batch}.{i}")
                deadline = time.monotonic() + 30
                while gw.peek_system_events(MAIN) and time.monotonic() < deadline:
                    time.sleep(0.005)
            done.set()
            for t in threads:
                t.join(60)
        finally:
            for g in gateways:
                g.close()
        assert len(got) == len(set(got)) == total
