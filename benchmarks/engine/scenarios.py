"""One function per scenario phase. Each runs in its own process against a fresh store."""

from __future__ import annotations

import json
import random
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from sessionwatch import Gateway
from sessionwatch.clock import system_clock
from sessionwatch.store.records import EventInput, EventRecord, PruneResult
from sessionwatch.store.sqlite import PRAGMAS, SQLiteStore

AGENT = "main"
Emit = Callable[..., None]


def key(name: str) -> str:
    return f"agent:{AGENT}:{name}"


def event(target: str, i: int) -> EventInput:
    now = system_clock()  # the bench's gateways run on the system clock
    return EventInput(target, AGENT, "human_direct_message", "human", f"bench event {i}", now, payload={"i": i})


def pct(lat: list[float]) -> dict[str, float]:
    a = sorted(lat)
    q = lambda p: a[min(len(a) - 1, int(p * len(a)))] * 1e6  # noqa: E731
    return {"p50_us": round(q(0.5), 1), "p99_us": round(q(0.99), 1), "max_us": round(a[-1] * 1e6, 1)}


def open_timed(url: str, *, sweep: bool = True) -> tuple[Gateway, float]:
    t0 = time.perf_counter()
    from sessionwatch.store import open_store

    gw = Gateway(open_store(url), sweep=sweep, timers=False)
    gw.state_version(key("warmup"))
    return gw, time.perf_counter() - t0


def append_many(
    gw: Gateway, count: int, target_of: Callable[[int], str], lat: list[float] | None = None
) -> tuple[float, int]:
    failures = 0
    record = gw.record
    t0 = time.perf_counter()
    if lat is None:
        for i in range(count):
            if record(event(target_of(i), i)) is None:
                failures += 1
    else:
        clock = time.perf_counter
        for i in range(count):
            a = clock()
            r = record(event(target_of(i), i))
            lat.append(clock() - a)
            if r is None:
                failures += 1
    return time.perf_counter() - t0, failures


def pending_cursors(gw: Gateway) -> int:
    return sum(1 for c in gw.store.cursors() if c.material > c.last_seen)


def row_count(gw: Gateway) -> int:
    return sum(1 for _ in _all_events(gw))


def _all_events(gw: Gateway) -> Iterator[EventRecord]:
    after = 0
    while True:
        page = gw.store.events_after(after, 1000)
        if not page:
            return
        yield from page
        after = page[-1].sequence


def info(url: str, args: dict[str, Any], emit: Emit) -> None:
    gw, open_s = open_timed(url)
    meta: dict[str, Any] = {"store": gw.store.url.split("@")[-1], "first_open_seconds": round(open_s, 3)}
    if isinstance(gw.store, SQLiteStore):
        conn = gw.store._conn
        meta["sqlite_version"] = sqlite3.sqlite_version
        meta["pragmas"] = {
            p: conn.execute(f"PRAGMA {p}").fetchone()[0]
            for p in (
                "journal_mode",
                "synchronous",
                "busy_timeout",
                "wal_autocheckpoint",
                "page_size",
                "cache_size",
                "user_version",
            )
        }
    import platform

    meta["python"] = platform.python_version()
    emit("info", meta=True, **meta)
    gw.close()


def append(url: str, args: dict[str, Any], emit: Emit) -> None:
    n, w, sessions, mode = args["n"], args["watchers"], args["sessions"], args["mode"]
    keys = [key(f"bench-s{i}") for i in range(sessions)]
    gw, open_s = open_timed(url)
    targets = keys if mode == "all" else keys[:1]
    t0 = time.perf_counter()
    registered = sum(1 for t in targets for j in range(w) if gw.watch(key(f"bench-w{j}"), t))
    if registered:
        emit("register_watch", n=registered, seconds=time.perf_counter() - t0, meta=True)
    lat: list[float] = []
    seconds, failures = append_many(gw, n, lambda i: keys[i % sessions], lat)
    on_watched = n if mode == "all" else -(-n // sessions)
    emit(
        "append_w0" if w == 0 else f"append_w{w}_{mode}",
        n=n,
        seconds=seconds,
        watchers=w,
        watch_mode="none" if w == 0 else mode,
        sessions=sessions,
        failures=failures,
        rows_after=row_count(gw),
        cursor_fanout_updates=w * on_watched,
        pending_cursors_after=pending_cursors(gw),
        first_open_seconds=round(open_s, 3),
        **pct(lat),
    )
    gw.close()


def changes(url: str, args: dict[str, Any], emit: Emit) -> None:
    rows, calls = args["rows"], args["calls"]
    big = key("bench-big")
    gw, _ = open_timed(url)
    seconds, failures = append_many(gw, rows, lambda i: big)
    emit("seed_append_single_session", n=rows, seconds=seconds, meta=True, failures=failures)
    page = gw.changes_since(big, 0)
    min_seq = page.earliest_available_sequence
    head = gw.state_version(big)
    retained = rows
    emit("changes_setup", meta=True, session_rows=retained, head=head, min_sequence=min_seq)
    rng = random.Random(12345)

    def run(op: str, after_of: Callable[[int], int], expect: int) -> None:
        lat: list[float] = []
        got = bad = 0
        changes_since = gw.changes_since
        t0 = time.perf_counter()
        for i in range(calls):
            a = time.perf_counter()
            r = changes_since(big, after_of(i), limit=200)
            lat.append(time.perf_counter() - a)
            got += len(r.events)
            bad += len(r.events) != expect
        emit(
            op,
            n=calls,
            seconds=time.perf_counter() - t0,
            limit=200,
            session_rows=retained,
            events_returned_avg=round(got / calls, 1),
            unexpected_results=bad,
            **pct(lat),
        )

    run("changes_since_oldest_limit200", lambda i: min_seq - 1, 200)
    run("changes_since_random_limit200", lambda i: min_seq - 1 + int(rng.random() * (retained - 200)), 200)
    run("changes_since_tail50_limit200", lambda i: head - 50, 50)
    run("changes_since_at_head_limit200", lambda i: head, 0)
    vcalls = calls * 10
    state_version = gw.state_version
    t0 = time.perf_counter()
    for _ in range(vcalls):
        state_version(big)
    emit("get_session_state_version", n=vcalls, seconds=time.perf_counter() - t0, session_rows=retained)
    gw.close()


def ack(url: str, args: dict[str, Any], emit: Emit) -> None:
    t = args["targets"]
    watcher = key("bench-watcher")
    targets = [key(f"bench-t{i}") for i in range(t)]
    gw, _ = open_timed(url)
    for target in targets:
        gw.watch(watcher, target)

    def make_pending() -> int:
        append_many(gw, t, lambda i: targets[i])
        return pending_cursors(gw)

    pending = make_pending()
    acknowledge = gw.acknowledge
    for op in ("ack_single_target", "ack_single_target_nothing_pending"):
        lat: list[float] = []
        t0 = time.perf_counter()
        for target in targets:
            a = time.perf_counter()
            acknowledge(watcher, [target])
            lat.append(time.perf_counter() - a)
        seconds = time.perf_counter() - t0
        if op == "ack_single_target":
            emit(
                op,
                n=t,
                seconds=seconds,
                pending_before=pending,
                pending_after=pending_cursors(gw),
                transactions=t,
                **pct(lat),
            )
        else:
            emit(op, n=t, seconds=seconds, pending_before=0, transactions=t, **pct(lat))
    pending = make_pending()
    t0 = time.perf_counter()
    acknowledge(watcher, targets)
    emit(
        f"ack_batch_{t}_targets_one_call",
        n=t,
        seconds=time.perf_counter() - t0,
        pending_before=pending,
        pending_after=pending_cursors(gw),
        transactions=1,
        note="n = targets acknowledged in one call",
    )
    gw.close()


def sweep_setup(url: str, args: dict[str, Any], emit: Emit) -> None:
    p, tn = args["pending"], args["targets"]
    gw, _ = open_timed(url)
    targets = [key(f"bench-t{i}") for i in range(tn)]
    t0 = time.perf_counter()
    for j in range(p):
        gw.put_session(key(f"bench-w{j}"))
    emit("create_watcher_session_entries", n=p, seconds=time.perf_counter() - t0, meta=True)
    t0 = time.perf_counter()
    for j in range(p):
        gw.watch(key(f"bench-w{j}"), targets[j % tn])
    emit("register_watch", n=p, seconds=time.perf_counter() - t0, meta=True)
    append_many(gw, tn, lambda i: targets[i])
    # A restart loses nothing in sessionwatch (the queue is durable); clear the queues so the sweep
    # has the peer's work to do: re-materialize every pending notice.
    if isinstance(gw.store, SQLiteStore):
        gw.store._conn.execute("UPDATE queue_heads SET drained = appended")
        gw.store._conn.execute("DELETE FROM system_events")
    else:
        with gw.store._pool.connection() as conn:
            conn.execute("UPDATE queue_heads SET drained = appended")  # same queue model as SQLite
            conn.execute("DELETE FROM system_events")
    emit("sweep_setup", meta=True, pending_cursors=pending_cursors(gw), targets=tn, watchers=p)
    gw.close()


def sweep_run(url: str, args: dict[str, Any], emit: Emit) -> None:
    gw, open_s = open_timed(url, sweep=False)
    emit("open_state_db_after_restart", n=1, seconds=open_s, meta=True)
    pending = pending_cursors(gw)
    t0 = time.perf_counter()
    gw.sweep()
    s1 = time.perf_counter() - t0
    renotified = sum(1 for c in gw.store.cursors() if c.material > c.last_seen and c.notified == c.material)
    queued = sum(len(gw.peek_system_events(key(f"bench-w{j}"))) for j in range(args["pending"]))
    emit(
        "sweep_after_restart",
        n=pending,
        seconds=s1,
        pending_cursors=pending,
        renotified=renotified,
        notices_queued=queued,
        note="n = pending cursors; includes the watcher-session existence check, the "
        "durable notice writes and one forced prune",
    )
    t0 = time.perf_counter()
    gw.sweep()
    emit(
        "sweep_repeat_same_process",
        n=pending,
        seconds=time.perf_counter() - t0,
        pending_cursors=pending_cursors(gw),
        note="notices already queued: dedupe makes this write-light",
    )
    gw.close()


def prune(url: str, args: dict[str, Any], emit: Emit) -> None:
    r, sessions, k = args["rows"], args["sessions"], args["calls"]
    keys = [key(f"bench-s{i}") for i in range(sessions)]
    gw, _ = open_timed(url)
    seconds, failures = append_many(gw, r, lambda i: keys[i % sessions])
    emit(f"seed_append_{sessions}_sessions", n=r, seconds=seconds, meta=True, failures=failures)
    before = row_count(gw)
    settings = gw.settings

    def prune_once() -> PruneResult:
        return gw.store.prune(
            gw.clock(), settings.retention_ms, settings.max_events, force=True, interval_ms=settings.prune_interval_ms
        )

    t0 = time.perf_counter()
    res = prune_once()
    s = time.perf_counter() - t0
    after = row_count(gw)
    emit(
        f"prune_{before}_to_cap",
        n=1,
        seconds=s,
        rows_before=before,
        rows_after=after,
        rows_deleted=res.rows_deleted,
        heads_stamped=res.heads_stamped,
        deleted_per_sec=round(res.rows_deleted / s, 1),
        note="n = prune calls (one write transaction)",
    )
    t0 = time.perf_counter()
    for _ in range(k):
        prune_once()
    emit("prune_at_cap_nothing_to_delete", n=k, seconds=time.perf_counter() - t0, rows=row_count(gw))
    gw.close()


def raw_insert_baseline(url: str, args: dict[str, Any], emit: Emit) -> None:
    """The floor: plain sqlite3, the same pragmas, the same event row and head upsert per transaction."""
    from sessionwatch.store.sqlite import apply_migrations, sqlite_path

    n, sessions = args["n"], args["sessions"]
    conn = sqlite3.connect(sqlite_path(url), isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    apply_migrations(conn)
    keys = [key(f"bench-s{i}") for i in range(sessions)]
    lat: list[float] = []
    insert = (
        "INSERT INTO events (dedupe_key, session_key, session_id, agent_id, kind, actor_type, actor_id,"
        " run_id, occurred_at, summary, body) VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING sequence"
    )
    head = (
        "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES (?,?,?,?)"
        " ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = excluded.last_sequence,"
        " updated_at = excluded.updated_at"
    )
    t0 = time.perf_counter()
    for i in range(n):
        a = time.perf_counter()
        k = keys[i % sessions]
        now = time.time_ns() // 1_000_000
        conn.execute("BEGIN IMMEDIATE")
        body = json.dumps(
            {
                "kind": "human_direct_message",
                "actorType": "human",
                "occurredAt": now,
                "summary": f"bench event {i}",
                "payload": {"i": i},
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        seq = conn.execute(
            insert, (None, k, None, AGENT, "human_direct_message", "human", None, None, now, f"bench event {i}", body)
        ).fetchone()[0]
        conn.execute(head, (k, AGENT, seq, now))
        conn.execute("COMMIT")
        lat.append(time.perf_counter() - a)
    seconds = time.perf_counter() - t0
    rows = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    emit(
        "raw_insert_baseline",
        n=n,
        seconds=seconds,
        sessions=sessions,
        rows_after=rows,
        note="plain sqlite3: event row + head upsert per transaction, same pragmas",
        **pct(lat),
    )
    conn.close()


PHASES: dict[str, Callable[[str, dict[str, Any], Emit], None]] = {
    "info": info,
    "append": append,
    "changes": changes,
    "ack": ack,
    "sweep-setup": sweep_setup,
    "sweep-run": sweep_run,
    "prune": prune,
    "raw": raw_insert_baseline,
}


def fresh_name() -> str:
    return uuid.uuid4().hex[:12]
