"""Two PostgresStore instances on one database behave like two gateway processes (two origins, two
pools, two LISTEN connections): wakes cross, a lost NOTIFY is recovered by the poll, locks and prunes
are shared, migrations race safely."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.store.postgres import PostgresStore, _migration_files, functions_sql, lock_key
from sessionwatch.store.records import WakeRequest
from tests.support import pg
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")]

MAIN, CHILD, OTHER = "agent:a:main", "agent:a:worker", "agent:a:other"


@pytest.fixture
def db() -> Iterator[str]:
    with pg.fresh_database() as url:
        yield url


def _wait(pred: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll until ``pred`` holds; an AssertionError naming it when it does not within ``timeout``."""
    return bool(wait_until(pred, timeout=timeout, what=getattr(pred, "__qualname__", "condition")))


def _setup(gw: Gateway) -> None:
    for key in (MAIN, CHILD, OTHER):
        gw.put_session(key)
    assert gw.watch(MAIN, CHILD)


def test_a_notice_committed_by_one_gateway_wakes_the_other_and_not_itself(db: str) -> None:
    clock = ManualClock()
    a, b = Gateway.open(db, clock=clock), Gateway.open(db, clock=clock)
    try:
        _setup(a)
        got_a: list[str] = []
        got_b: list[str] = []
        a.subscribe_wakes(MAIN, lambda w: got_a.append(w.target))
        b.subscribe_wakes(MAIN, lambda w: got_b.append(w.target))
        assert _wait(b.store.listening.is_set) and _wait(a.store.listening.is_set)  # type: ignore[attr-defined]
        a.inbound(CHILD, "typed", channel="telegram")
        assert got_a == [CHILD]  # the committing gateway delivers its own wake at once
        assert _wait(lambda: got_b == [CHILD], 5), got_b  # the other one through NOTIFY
        time.sleep(0.3)  # a window for a duplicate wake to (wrongly) arrive: nothing may happen in it
        a.run_due()
        b.run_due()  # the poll must not repeat what NOTIFY delivered
        assert got_a == [CHILD] and got_b == [CHILD]
    finally:
        a.close()
        b.close()


def test_a_missed_notify_is_recovered_by_the_poll_exactly_once(db: str) -> None:
    writer = PostgresStore(db)
    reader = PostgresStore(db)  # never listens: only the poll can tell it
    clock = ManualClock()
    try:
        with Gateway(writer, clock=clock) as gw:
            _setup(gw)
            assert reader.poll_wakes([MAIN]) == []
            gw.inbound(CHILD, "typed", channel="web")
            gw.inbound(OTHER, "unwatched", channel="web")
            assert reader.poll_wakes([MAIN]) == [WakeRequest(MAIN, CHILD)]
            assert reader.poll_wakes([MAIN]) == []  # once
            gw.inbound(CHILD, "again", channel="web")  # the same pending notice: nothing new to wake for
            assert reader.poll_wakes([MAIN]) == []
            gw.drain_system_events(MAIN)  # material moved on after the notice froze: one reopen, waking
            assert reader.poll_wakes([MAIN]) == [WakeRequest(MAIN, CHILD)]
            gw.drain_system_events(MAIN)  # nothing new since: nothing re-opens
            assert reader.poll_wakes([MAIN]) == []
            gw.inbound(CHILD, "third", channel="web")
            assert reader.poll_wakes(["agent:a:subagent:x", MAIN]) == [WakeRequest(MAIN, CHILD)]
            assert reader.poll_wakes([MAIN]) == []
    finally:
        reader.close()


def test_the_poll_starts_from_what_was_queued_when_the_store_opened(db: str) -> None:
    with Gateway.open(db, clock=ManualClock()) as gw:
        _setup(gw)
        gw.inbound(CHILD, "typed", channel="web")
    reader = PostgresStore(db)  # opened later: notices already pending are the restart sweep's business
    try:
        assert reader.poll_wakes([MAIN]) == []
        with Gateway.open(db, clock=ManualClock()) as gw:
            gw.drain_system_events(MAIN)
            gw.inbound(CHILD, "typed again", channel="web")
        assert reader.poll_wakes(["agent:a:subagent:x", MAIN]) == [WakeRequest(MAIN, CHILD)]
    finally:
        reader.close()


@pytest.mark.slow
def test_the_listener_reconnects_and_the_poll_covers_the_gap(db: str) -> None:
    clock = ManualClock()
    a, b = Gateway.open(db, clock=clock), Gateway.open(db, clock=clock)
    store_b: PostgresStore = b.store  # type: ignore[assignment]
    store_b.backoff_initial_s = 3.0  # a gap long enough to commit into
    try:
        _setup(a)
        got: list[str] = []
        b.subscribe_wakes(MAIN, lambda w: got.append(w.target))
        assert _wait(store_b.listening.is_set)
        with psycopg.connect(db, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query ILIKE 'LISTEN%%'"
            ).fetchall()
        assert killed
        assert _wait(lambda: not store_b.listening.is_set(), 5)
        a.inbound(CHILD, "typed while b was not listening", channel="web")
        time.sleep(0.2)  # the window a NOTIFY would have arrived in; nothing may (b is not listening)
        assert got == []  # the NOTIFY went nowhere
        b.run_due()  # the engine's timer: the poll finds the waking notice
        assert got == [CHILD]
        assert _wait(store_b.listening.is_set, 10)  # back, after the backoff
        assert store_b.listener_connects == 2
        a.drain_system_events(MAIN)
        clock.advance(60_000)  # past the coalescing window
        a.inbound(CHILD, "typed after the reconnect", channel="web")
        assert _wait(lambda: got == [CHILD, CHILD], 5), got
    finally:
        a.close()
        b.close()


def test_try_lock_admits_one_gateway_at_a_time(db: str) -> None:
    s1, s2 = PostgresStore(db), PostgresStore(db)
    try:
        held = s1.try_lock("upstream-monitor")
        assert held is not None
        with held:
            assert s2.try_lock("upstream-monitor") is None
            other = s2.try_lock("another-job")
            assert other is not None
            with other:
                pass
        again = s2.try_lock("upstream-monitor")
        assert again is not None
        with again:
            assert s1.try_lock("upstream-monitor") is None
    finally:
        s1.close()
        s2.close()


def test_one_prune_at_a_time_and_the_interval_is_shared(db: str) -> None:
    day = 86_400_000
    s1, s2 = PostgresStore(db), PostgresStore(db)
    try:
        key = lock_key(s1.schema, "prune")
        with psycopg.connect(db, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            assert s1.prune(10 * day, day, 100, force=True, interval_ms=3_600_000).skipped
        assert not s1.prune(10 * day, day, 100, force=True, interval_ms=3_600_000).skipped
        # another gateway's throttled prune within the interval is skipped: last_prune_at is shared
        assert s2.prune(10 * day + 1000, day, 100, force=False, interval_ms=3_600_000).skipped
        assert not s2.prune(10 * day + 3_600_000, day, 100, force=False, interval_ms=3_600_000).skipped
    finally:
        s1.close()
        s2.close()


def test_sequences_are_never_reused_after_pruning(db: str) -> None:
    clock = ManualClock()
    with Gateway.open(db, clock=clock, settings=Settings(max_events=2)) as gw:
        _setup(gw)
        seqs = [gw.inbound(CHILD, f"t{i}", channel="web")["event"]["sequence"] for i in range(5)]
        gw.prune(force=True)
        assert [e["sequence"] for e in gw.events_after(0)] == seqs[-2:]
        gw.delete_session(CHILD)
        gw.put_session(CHILD)
        gw.watch(MAIN, CHILD)
        assert gw.inbound(CHILD, "after", channel="web")["event"]["sequence"] == seqs[-1] + 1


def test_gateways_starting_together_migrate_once() -> None:
    with pg.fresh_database(migrated=False) as url:
        errors: list[BaseException] = []
        stores: list[PostgresStore] = []

        def open_one() -> None:
            try:
                stores.append(PostgresStore(url))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        try:
            assert not errors, errors
            versions = sorted(_migration_files())  # every numbered file, each applied exactly once
            assert len(stores) == 6 and {s.schema_version for s in stores} == {versions[-1]}
            with psycopg.connect(url) as conn:
                assert conn.execute(
                    "SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version"
                ).fetchall() == [(v, 1) for v in versions]
                # and the functions, once, after the migrations (their stamp names this version's file)
                assert conn.execute("SELECT value FROM meta WHERE key = 'functions_sha256'").fetchone() == (
                    functions_sql()[2],
                )
        finally:
            for s in stores:
                s.close()


def test_a_schema_on_the_search_path_is_a_separate_store(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA tenant_b")
    url_b = db + "?options=-csearch_path%3Dtenant_b&pool_size=2"
    a, b = Gateway.open(db, clock=ManualClock()), Gateway.open(url_b, clock=ManualClock())
    try:
        assert b.store.schema == "tenant_b" and a.store.schema == "public"  # type: ignore[attr-defined]
        assert a.store.channel != b.store.channel  # type: ignore[attr-defined]
        _setup(a)
        a.inbound(CHILD, "typed", channel="web")
        assert a.state_version(CHILD) == 1 and b.state_version(CHILD) == 0
        assert b.cursors() == []
    finally:
        a.close()
        b.close()
