"""Several gateway processes on one PostgreSQL database: wakes, commit order, crashes, restarts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sessionwatch import Gateway
from sessionwatch.notices import notice_text
from sessionwatch.store.postgres import PostgresStore
from tests.support import pg
from tests.support.waiting import wait_until

from .procs import HttpGateway, Recorder, WakeReader

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")]

MAIN, CHILD = "agent:a:main", "agent:a:worker"
WATCHERS = ["agent:a:main", "agent:a:lead"]
TARGETS = [f"agent:a:t{i}" for i in range(4)]


@pytest.fixture
def db() -> Iterator[str]:
    with pg.fresh_database() as url:
        yield url


@pytest.fixture
def gateways(db: str, tmp_path: Path) -> Iterator[list[HttpGateway]]:
    started = [HttpGateway(db, tmp_path / f"gateway-{name}.log") for name in "abc"]
    try:
        for g in started:
            g.wait_ready()
        yield started
    finally:
        for g in started:
            g.stop()


def _watch_all(url: str) -> None:
    with Gateway.open(url, timers=False) as gw:
        for key in WATCHERS + TARGETS:
            gw.put_session(key)
        for w in WATCHERS:
            for t in TARGETS:
                assert gw.watch(w, t)


def _rows(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT sequence, session_key FROM events ORDER BY sequence").fetchall()  # type: ignore[return-value]


def _assert_one_notice_per_lagging_pair(url: str) -> None:
    """Every watcher holds exactly one queued notice per target it lags on, quoting its last_seen,
    frozen at the first unacknowledged event; heads equal the newest event of each target."""
    rows = _rows(url)
    with Gateway(PostgresStore(url), sweep=False, timers=False) as gw:  # no restart sweep: look, do not touch
        for t in TARGETS:
            seqs = [s for s, k in rows if k == t]
            assert gw.state_version(t) == (max(seqs) if seqs else 0)
        for w in WATCHERS:
            queued = [e["text"] for e in gw.peek_system_events(w)]
            lagging = [c for c in gw.cursors(watcher=w) if c["material"] > c["lastSeen"]]
            assert sorted(queued) == sorted(notice_text(c["target"], c["lastSeen"]) for c in lagging)
            for c in lagging:
                seqs = [s for s, k in rows if k == c["target"]]
                assert (c["notified"], c["material"]) == (min(seqs), max(seqs))


def test_a_turn_through_gateway_a_wakes_gateway_c_and_drains_once_through_b(gateways: list[HttpGateway]) -> None:
    a, b, c = gateways
    a.call("PUT", f"/v1/sessions/{MAIN}", {})
    a.call("PUT", f"/v1/sessions/{CHILD}", {})
    assert a.call("POST", "/v1/watch", {"watcher": MAIN, "target": CHILD}) == {"watched": True}
    reader = WakeReader(c, MAIN)
    try:
        t0 = time.monotonic()
        out = a.call("POST", f"/v1/sessions/{CHILD}/inbound", {"text": "a person typed", "channel": "telegram"})
        assert out["recorded"]
        wake = reader.next(10)
        latency = time.monotonic() - t0
        assert wake is not None and (wake["watcher"], wake["target"]) == (MAIN, CHILD)
        print(f"cross-gateway wake latency: {latency * 1000:.1f} ms")
        drained = [g.call("POST", f"/v1/sessions/{MAIN}/system-events/drain", {})["entries"] for g in (b, c, a)]
        assert [len(d) for d in drained] == [1, 0, 0]
        assert drained[0][0]["text"] == notice_text(CHILD, 0)
        assert reader.next(2.5) is None  # neither the poll nor a second NOTIFY repeats the wake
    finally:
        reader.close()


@pytest.mark.slow
def test_eight_recording_processes_commit_in_sequence_order(db: str) -> None:
    _watch_all(db)
    per_worker = 60
    workers = [Recorder(db, i, per_worker, TARGETS) for i in range(8)]
    for w in workers:
        assert w.ready.wait(60), "a recorder did not start"
    seen: list[int] = []
    stop = threading.Event()

    def poll() -> None:  # a follower reading "sequence > last" while the writers race
        with psycopg.connect(db, autocommit=True) as conn:
            last = 0
            while True:
                final = stop.is_set()
                for (seq,) in conn.execute(
                    "SELECT sequence FROM events WHERE sequence > %s ORDER BY sequence", (last,)
                ):
                    seen.append(seq)
                    last = seq
                if final:
                    return

    poller = threading.Thread(target=poll)
    poller.start()
    for w in workers:
        w.go()
    for w in workers:
        w.wait()
    stop.set()
    poller.join(30)
    total = per_worker * len(workers)
    committed = sorted(s for w in workers for s in w.committed)
    assert committed == list(range(1, total + 1))  # no duplicate, no gap, nothing lost
    assert [s for s, _ in _rows(db)] == committed
    assert seen == committed  # the follower never skipped a sequence that committed late
    _assert_one_notice_per_lagging_pair(db)


@pytest.mark.slow
def test_killing_a_gateway_mid_burst_loses_nothing(db: str) -> None:
    _watch_all(db)
    victim = Recorder(db, 0, 100_000, TARGETS)
    survivor = Recorder(db, 1, 300, TARGETS)
    for w in (victim, survivor):
        assert w.ready.wait(60)  # both open (and swept) before either records
    for w in (victim, survivor):
        w.go()
    wait_until(lambda: len(victim.committed) >= 100, timeout=60, interval=0.01, what="100 commits by the victim")
    victim.proc.kill()
    victim.proc.wait(10)
    survivor.wait()
    rows = {s for s, _ in _rows(db)}
    reported = set(victim.committed) | set(survivor.committed)
    assert reported <= rows  # every recording a process saw commit is there
    assert len(rows - reported) <= 1  # at most the one committed as the process died, and it is whole
    assert len(survivor.committed) == 300
    _assert_one_notice_per_lagging_pair(db)
    with Gateway.open(db, timers=False) as gw:  # a new gateway starts cleanly and carries on
        assert gw.inbound(TARGETS[0], "after the crash", channel="web")["event"]["sequence"] == max(rows) + 1
