"""PostgreSQL crashes under load: nothing a gateway acknowledged is lost, nothing is recorded twice, and a
reader following the log never skips a sequence.

A private cluster (tests/support/pg_cluster.py; the shared server is never restarted) serves three
gateway processes; eight writer threads spread over them record person turns (with and without a
dedupe key), create sessions, register and drop watches, spawn children, send messages, enqueue system
events and take them (drains, and peeks acknowledged by id), while a reader follows ``GET /v1/events``
and one more thread creates tokens and changes a data setting through the Python API. The server is
crashed with ``pg_ctl restart -m immediate`` again and again under that load. A writer counts a write
as acknowledged only when a gateway answered it with success; a 503 (the gateway could not prove the
write durable) is retried with the same dedupe key where there is one, and otherwise counts as not
acknowledged. At the end the database itself is read and held against everything that was acknowledged
and everything the reader saw.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from sessionwatch import Gateway
from sessionwatch.notices import notice_text
from sessionwatch.store.postgres.connection import PROVE_WITHIN_S
from tests.support import pg_cluster
from tests.support.waiting import wait_until

from .procs import HttpGateway, WakeReader

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

AGENT = "crash"
WRITERS = 8
CRASHES = 6
MAIN, LEAD = f"agent:{AGENT}:main", f"agent:{AGENT}:lead"
RETRY_FOR_S = 90.0  # a keyed write is retried (same dedupe key) for this long before the writer gives up


def _key(rest: str) -> str:
    return f"agent:{AGENT}:{rest}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[pg_cluster.PrivateCluster]:
    reason = pg_cluster.unavailable_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        pytest.skip(reason)
    c = pg_cluster.PrivateCluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


@dataclass
class Ledger:
    """What gateways acknowledged, per kind of write, and what the reader saw."""

    keyed: dict[str, int] = field(default_factory=dict)  # dedupe key -> sequence answered
    unkeyed: dict[str, int] = field(default_factory=dict)  # humanId -> sequence answered
    sessions: set[str] = field(default_factory=set)
    watches: set[tuple[str, str]] = field(default_factory=set)
    unwatched: set[tuple[str, str]] = field(default_factory=set)
    unwatch_tried: set[tuple[str, str]] = field(default_factory=set)  # answered or not
    spawned: dict[str, str] = field(default_factory=dict)  # child key -> its spawner
    sent: set[str] = field(default_factory=set)  # message texts
    enqueued: set[str] = field(default_factory=set)  # texts
    drained: list[str] = field(default_factory=list)  # texts of complete drain answers, in order
    peeked: set[str] = field(default_factory=set)  # texts a peek showed (the client has them)
    acked: set[str] = field(default_factory=set)  # texts whose acknowledgment by id was answered
    tokens: set[str] = field(default_factory=set)  # ids of stored tokens whose creation returned
    settings: list[int] = field(default_factory=list)  # wake_coalesce_ms values set, in order (acknowledged)
    settings_tried: list[int] = field(default_factory=list)  # every value a setting change was sent with
    refused: Counter[str] = field(default_factory=Counter)  # answers that were not a success, by status
    seen: dict[int, str | None] = field(default_factory=dict)  # sequence -> actorId, as the reader saw them
    reader_after: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acknowledged(self) -> int:
        return (
            len(self.keyed)
            + len(self.unkeyed)
            + len(self.sessions)
            + len(self.watches)
            + len(self.unwatched)
            + len(self.spawned)
            + len(self.sent)
            + len(self.enqueued)
            + len(self.drained)
            + len(self.acked)
            + len(self.tokens)
            + len(self.settings)
        )


def _call(
    http: httpx.Client, method: str, path: str, body: Any, ledger: Ledger, caller: str | None = None
) -> dict[str, Any] | None:
    """One request (a tool's as ``caller``); the JSON of a 200, else None (counted by what went wrong)."""
    headers = {"X-Session-Key": caller} if caller else None
    try:
        res = http.request(method, path, json=body, headers=headers)
    except httpx.HTTPError as exc:
        with ledger.lock:
            ledger.refused[exc.__class__.__name__] += 1
        return None
    if res.status_code != 200:
        with ledger.lock:
            ledger.refused[str(res.status_code)] += 1
        assert res.status_code == 503, (res.status_code, res.text)  # a store failure, never a 500 or a 4xx
        assert res.headers.get("retry-after"), "a 503 says when to retry"
        return None
    return res.json()  # type: ignore[no-any-return]


def _writer(w: int, gateways: list[HttpGateway], ledger: Ledger, stop: threading.Event) -> None:
    target, queue, observer = _key(f"t{w}"), _key(f"q{w}"), _key(f"obs{w}")
    with httpx.Client(base_url=gateways[w % len(gateways)].url, timeout=30) as http:
        n = 0
        while not stop.is_set():
            n += 1
            # A person's turn with a dedupe key: retried with the same key until a gateway acknowledges it.
            key, deadline = f"k-{w}-{n}", time.monotonic() + RETRY_FOR_S
            while time.monotonic() < deadline:
                out = _call(
                    http,
                    "POST",
                    f"/v1/sessions/{target}/inbound",
                    {"text": f"keyed {w}.{n}", "channel": "web", "dedupeKey": key, "humanId": f"h-{w}-{n}"},
                    ledger,
                )
                if out is not None and out["recorded"]:
                    with ledger.lock:
                        ledger.keyed[key] = out["event"]["sequence"]
                    break
                if out is not None:  # the turn kept, its event not written (the database went away): again
                    with ledger.lock:
                        ledger.refused["unrecorded"] += 1
                time.sleep(0.05)
            # A person's turn without one: a failure is not retried (it is simply not acknowledged).
            human = f"u-{w}-{n}"
            out = _call(
                http,
                "POST",
                f"/v1/sessions/{target}/inbound",
                {"text": f"unkeyed {w}.{n}", "channel": "web", "humanId": human},
                ledger,
            )
            if out is not None and out["recorded"]:
                with ledger.lock:
                    ledger.unkeyed[human] = out["event"]["sequence"]
            elif out is not None:  # answered, but its event not recorded: not acknowledged, so not owed
                with ledger.lock:
                    ledger.refused["unrecorded"] += 1
            session = _key(f"s-{w}-{n}")
            if _call(http, "PUT", f"/v1/sessions/{session}", {}, ledger) is not None:
                with ledger.lock:
                    ledger.sessions.add(session)
                pair = {"watcher": observer, "target": session}
                out = _call(http, "POST", "/v1/watch", pair, ledger)
                if out is not None and out.get("watched"):
                    with ledger.lock:
                        ledger.watches.add((observer, session))
                    if n % 2 == 0:  # every other watch is dropped again
                        with ledger.lock:
                            ledger.unwatch_tried.add((observer, session))
                        out = _call(http, "POST", "/v1/unwatch", pair, ledger)
                        if out is not None and out.get("unwatched"):
                            with ledger.lock:
                                ledger.unwatched.add((observer, session))
            # A spawn, retried with the same runId until a gateway answers it (it is keyed by the runId).
            spawn, deadline = {"label": f"kid-{w}-{n}", "runId": f"run-{w}-{n}"}, time.monotonic() + RETRY_FOR_S
            while time.monotonic() < deadline:
                out = _call(http, "POST", "/v1/tools/sessions_spawn", spawn, ledger, caller=observer)
                if out is not None:
                    with ledger.lock:
                        ledger.spawned[out["sessionKey"]] = observer
                    break
                time.sleep(0.05)
            message = f"send {w}.{n}"
            out = _call(
                http, "POST", "/v1/tools/sessions_send", {"sessionKey": target, "message": message}, ledger, observer
            )
            if out is not None and out.get("status") == "accepted":
                with ledger.lock:
                    ledger.sent.add(message)
            text = f"e-{w}-{n}"
            out = _call(http, "POST", f"/v1/sessions/{queue}/system-events", {"text": text}, ledger)
            if out is not None and out["queued"]:
                with ledger.lock:
                    ledger.enqueued.add(text)
            if n % 3 == 0:
                out = _call(http, "POST", f"/v1/sessions/{queue}/system-events/drain", {}, ledger)
                if out is not None:
                    with ledger.lock:
                        ledger.drained += [e["text"] for e in out["entries"]]
            elif n % 3 == 1:  # the other way to take entries: peek, then acknowledge by id
                out = _call(http, "GET", f"/v1/sessions/{queue}/system-events", None, ledger)
                if out is not None and out["entries"]:
                    entries = out["entries"]
                    with ledger.lock:
                        ledger.peeked.update(e["text"] for e in entries)
                    ids = {"ids": [e["id"] for e in entries]}
                    if _call(http, "POST", f"/v1/sessions/{queue}/system-events/ack", ids, ledger) is not None:
                        with ledger.lock:
                            ledger.acked.update(e["text"] for e in entries)


def _administrator(url: str, ledger: Ledger, stop: threading.Event) -> None:
    """Tokens and a data setting, through the Python API (they have no HTTP route): a failed call is
    simply not acknowledged."""
    gw: Gateway | None = None
    i = 0
    while not stop.is_set():
        try:
            if gw is None:
                gw = Gateway.open(url, timers=False)
            i += 1
            _, row = gw.create_token(agents=[AGENT], name=f"crash-{i}")
            with ledger.lock:
                ledger.tokens.add(row.token_id)
            value = 100 + i
            with ledger.lock:
                ledger.settings_tried.append(value)
            gw.set_data_settings({"wake_coalesce_ms": value})
            with ledger.lock:
                ledger.settings.append(value)
        except Exception:  # the server is down, or the write in doubt: not acknowledged
            time.sleep(0.1)
        time.sleep(0.05)
    if gw is not None:
        gw.close()


def _reader(gateways: list[HttpGateway], ledger: Ledger, stop: threading.Event) -> None:
    clients = [httpx.Client(base_url=g.url, timeout=30) for g in gateways]
    try:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                res = clients[i % len(clients)].get("/v1/events", params={"after": ledger.reader_after, "limit": 500})
            except httpx.HTTPError:
                time.sleep(0.05)
                continue
            if res.status_code != 200:
                time.sleep(0.05)
                continue
            events = res.json()["events"]
            for e in events:
                assert e["sequence"] > ledger.reader_after
                ledger.seen[e["sequence"]] = e.get("actorId")
                ledger.reader_after = e["sequence"]
            if not events:
                time.sleep(0.02)
    finally:
        for c in clients:
            c.close()


def _final(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        events = conn.execute("SELECT sequence, actor_id, dedupe_key FROM events ORDER BY sequence").fetchall()
        sessions = {r[0] for r in conn.execute("SELECT session_key FROM sessions")}
        cursors = {(r[0], r[1]) for r in conn.execute("SELECT watcher, target FROM cursors")}
        spawns = {r[0] for r in conn.execute("SELECT run_id FROM events WHERE kind = 'child_spawned'")}
        messages = {r[0] for r in conn.execute("SELECT text FROM messages")}
        tokens = {r[0] for r in conn.execute("SELECT token_id FROM tokens")}
        setting = conn.execute("SELECT value FROM data_settings WHERE name = 'wake_coalesce_ms'").fetchone()
    return {
        "events": events,
        "sessions": sessions,
        "cursors": cursors,
        "spawns": spawns,
        "messages": messages,
        "tokens": tokens,
        "setting": None if setting is None else int(setting[0]),
    }


def test_no_acknowledged_write_is_lost_over_repeated_database_crashes(
    cluster: pg_cluster.PrivateCluster, tmp_path: Path
) -> None:
    url = cluster.url()
    with Gateway.open(url, timers=False) as gw:
        for key in (MAIN, LEAD):
            gw.put_session(key)
        for w in range(WRITERS):
            for key in (_key(f"t{w}"), _key(f"q{w}"), _key(f"obs{w}")):
                gw.put_session(key)
            for watcher in (MAIN, LEAD):
                assert gw.watch(watcher, _key(f"t{w}"))
    gateways = [HttpGateway(url, tmp_path / f"gateway-{name}.log") for name in "abc"]
    ledger = Ledger()
    stop_writers, stop_reader = threading.Event(), threading.Event()
    writers = [
        threading.Thread(target=_writer, args=(w, gateways, ledger, stop_writers), daemon=True) for w in range(WRITERS)
    ]
    reader = threading.Thread(target=_reader, args=(gateways, ledger, stop_reader), daemon=True)
    administrator = threading.Thread(target=_administrator, args=(url, ledger, stop_writers), daemon=True)
    writers.append(administrator)
    try:
        for g in gateways:
            g.wait_ready()
        for t in [*writers, reader]:
            t.start()
        rng = random.Random(19)
        for _ in range(CRASHES):
            before = ledger.acknowledged()
            # Crash only under load: after a fresh batch of acknowledged writes since the last crash.
            wait_until(lambda b=before: ledger.acknowledged() >= b + 150, timeout=120, what="writes under load")
            time.sleep(rng.uniform(0.0, 0.3))
            cluster.crash()
        before = ledger.acknowledged()
        wait_until(lambda: ledger.acknowledged() >= before + 150, timeout=120, what="writes after the last crash")
        stop_writers.set()
        for t in writers:
            t.join(RETRY_FOR_S + 60)
            assert not t.is_alive(), "a writer hung"
        last = max([*ledger.keyed.values(), *ledger.unkeyed.values()])
        wait_until(lambda: ledger.reader_after >= last, timeout=60, what="the reader to catch up")
        stop_reader.set()
        reader.join(60)
        for g in gateways:
            assert g.proc.poll() is None, f"a gateway died: {g.log_path.read_text()[-3000:]}"
    finally:
        stop_writers.set()
        stop_reader.set()
        for g in gateways:
            g.stop()

    final = _final(url)
    by_seq = {s: (actor, dedupe) for s, actor, dedupe in final["events"]}
    dedupes = {dedupe: s for s, _, dedupe in final["events"] if dedupe is not None}
    # The person turns' actors are unique per turn (h-… keyed, u-… unkeyed): each must be recorded once.
    actors = Counter(actor for _, actor, _ in final["events"] if actor is not None and actor[:2] in ("h-", "u-"))
    lost_keyed = sorted(k for k, s in ledger.keyed.items() if dedupes.get(k) != s)
    found = {a: s for s, a, _ in final["events"] if a is not None}
    lost_unkeyed = sorted(h for h, s in ledger.unkeyed.items() if found.get(h) != s)
    lost_sessions = sorted(ledger.sessions - final["sessions"])
    lost_watches = sorted((ledger.watches - ledger.unwatch_tried) - final["cursors"])
    lost_unwatches = sorted(ledger.unwatched & final["cursors"])  # an acknowledged unwatch undone
    lost_spawns = sorted(
        child
        for child, spawner in ledger.spawned.items()
        if child not in final["sessions"]
        or (spawner, child) not in final["cursors"]
        or "run-" + child.rsplit("kid-", 1)[1] not in final["spawns"]
    )
    lost_sends = sorted(ledger.sent - final["messages"])
    lost_tokens = sorted(ledger.tokens - final["tokens"])
    # The stored value is the last acknowledged one, or one sent after it (its answer lost to a crash).
    last_setting = ledger.settings[-1] if ledger.settings else None
    later = ledger.settings_tried[ledger.settings_tried.index(last_setting) :] if last_setting else []
    setting_lost = last_setting is not None and final["setting"] not in later
    duplicates = sorted(a for a, n in actors.items() if n > 1)
    with Gateway.open(url, timers=False) as gw:  # what is still queued (no sweep side effects matter now)
        queued = [e["text"] for w in range(WRITERS) for e in gw.peek_system_events(_key(f"q{w}"))]
    drained_twice = sorted(t for t, n in Counter(ledger.drained).items() if n > 1)
    lost_entries = sorted(ledger.enqueued - set(ledger.drained) - ledger.peeked - set(queued))
    # An answered acknowledgment by id that did not hold: its entries queued again, or drained later.
    lost_acks = sorted(ledger.acked & (set(queued) | set(ledger.drained)))
    # The reader moved past every sequence up to reader_after: any such event it did not see was skipped,
    # and a sequence it saw must still hold the event it saw there (or none: never a different one).
    skipped = sorted(s for s in by_seq if s <= ledger.reader_after and s not in ledger.seen)
    reused = sorted(s for s, actor in ledger.seen.items() if s in by_seq and by_seq[s][0] != actor)
    vanished = sorted(s for s in ledger.seen if s not in by_seq)
    print(
        f"crashes: {cluster.crashes}; acknowledged writes: {ledger.acknowledged()} "
        f"(keyed turns {len(ledger.keyed)}, unkeyed {len(ledger.unkeyed)}, sessions {len(ledger.sessions)}, "
        f"watches {len(ledger.watches)}, unwatches {len(ledger.unwatched)}, spawns {len(ledger.spawned)}, "
        f"sends {len(ledger.sent)}, enqueued {len(ledger.enqueued)}, drained entries {len(ledger.drained)}, "
        f"acknowledged by id {len(ledger.acked)}, tokens {len(ledger.tokens)}, settings {len(ledger.settings)}); "
        f"not acknowledged: {dict(ledger.refused)}; events in the log: {len(by_seq)}; "
        f"lost: keyed {len(lost_keyed)}, unkeyed {len(lost_unkeyed)}, sessions {len(lost_sessions)}, "
        f"watches {len(lost_watches)}, unwatches {len(lost_unwatches)}, spawns {len(lost_spawns)}, "
        f"sends {len(lost_sends)}, queue entries {len(lost_entries)}, acknowledgments {len(lost_acks)}, "
        f"tokens {len(lost_tokens)}, setting {int(setting_lost)}; duplicates {len(duplicates)}; "
        f"drained twice {len(drained_twice)}; reader saw {len(ledger.seen)}: skipped {len(skipped)}, "
        f"reused {len(reused)}, vanished {len(vanished)}"
    )
    assert cluster.crashes >= CRASHES
    assert ledger.acknowledged() > 1000
    assert lost_keyed == [] and lost_unkeyed == []
    assert lost_sessions == [] and lost_watches == [] and lost_entries == []
    assert lost_unwatches == [] and lost_spawns == [] and lost_sends == [] and lost_acks == []
    assert lost_tokens == [] and not setting_lost, (final["setting"], ledger.settings[-3:])
    assert ledger.spawned and ledger.sent and ledger.acked and ledger.unwatched and ledger.tokens and ledger.settings
    assert duplicates == [] and drained_twice == []
    assert skipped == [] and reused == [] and vanished == []


def test_gateways_carry_on_across_a_database_crash(cluster: pg_cluster.PrivateCluster, tmp_path: Path) -> None:
    """After a crash no gateway needs a restart: the next request on each gets a fresh connection, and a
    wake still crosses from the gateway that recorded to the one holding the stream."""
    url = cluster.url()
    main, worker = _key("restart-main"), _key("restart-worker")
    gateways = [HttpGateway(url, tmp_path / f"restart-{name}.log") for name in "abc"]
    reader = None
    try:
        for g in gateways:
            g.wait_ready()
        a, _, c = gateways
        a.call("PUT", f"/v1/sessions/{main}", {})
        a.call("PUT", f"/v1/sessions/{worker}", {})
        a.call("POST", "/v1/watch", {"watcher": main, "target": worker})
        reader = WakeReader(c, main)
        cluster.crash()
        t0 = time.monotonic()
        out = wait_until(
            lambda: a.client.post(f"/v1/sessions/{worker}/inbound", json={"text": "after the crash", "channel": "web"}),
            timeout=60,
            what="a recording accepted after the crash",
        )
        while out.status_code == 503:  # at most the requests in flight when the server died get a 503
            out = a.client.post(f"/v1/sessions/{worker}/inbound", json={"text": "after the crash", "channel": "web"})
        assert out.status_code == 200 and out.json()["recorded"], out.text
        wake = reader.next(30)  # C's listener reconnects (or its poll catches up) and delivers it
        assert wake is not None and wake["target"] == worker
        print(f"wake after the crash: {(time.monotonic() - t0) * 1000:.0f} ms")
        entries = c.call("POST", f"/v1/sessions/{main}/system-events/drain", {})["entries"]
        assert [e["text"] for e in entries] == [notice_text(worker, 0)]
    finally:
        if reader is not None:
            reader.close()
        for g in gateways:
            g.stop()


def test_a_gateway_started_while_the_database_is_down_connects_when_it_comes_up(
    cluster: pg_cluster.PrivateCluster, tmp_path: Path
) -> None:
    cluster.halt()
    g: HttpGateway | None = None
    try:
        g = HttpGateway(cluster.url(), tmp_path / "early.log")

        def live() -> httpx.Response:
            assert g is not None and g.proc.poll() is None, f"the gateway exited: {g.log_path.read_text()[-2000:]}"
            return httpx.get(g.url + "/v1/health/live", timeout=5)

        assert wait_until(live, timeout=30, what="liveness").status_code == 200
        ready = httpx.get(g.url + "/v1/health/ready", timeout=5)
        assert ready.status_code == 503 and "waiting for the database" in ready.json()["message"], ready.text
        refused = httpx.put(g.url + f"/v1/sessions/{_key('early')}", json={}, timeout=5)
        assert refused.status_code == 503 and refused.headers["retry-after"], refused.text
        cluster.resume()
        wait_until(lambda: httpx.get(g.url + "/v1/health/ready", timeout=5).status_code == 200, timeout=60)
        assert g.call("PUT", f"/v1/sessions/{_key('early')}", {})["sessionKey"] == _key("early")
    finally:
        if g is not None:
            g.stop()
        if not cluster.running():
            cluster.resume()


def test_every_acknowledged_write_is_on_disk_before_its_answer(cluster: pg_cluster.PrivateCluster) -> None:
    """No race needed: with the server's WAL writer slowed to its 10 s maximum, nothing but the gateway's
    own flush puts an asynchronous commit on disk, so a crash right after the answers shows whether each
    answer waited for it (before the fix, every one of these was lost)."""
    cluster.execute("postgres", "ALTER SYSTEM SET wal_writer_delay = '10s'")
    cluster.execute("postgres", "ALTER SYSTEM SET wal_writer_flush_after = '1GB'")
    cluster.execute("postgres", "SELECT pg_reload_conf()")
    key = _key("on-disk")
    try:
        with Gateway.open(cluster.url()) as gw:
            gw.put_session(key)
            gw.put_session(MAIN)
            gw.watch(MAIN, key)  # so a person's turn is recorded
            answers = [gw.inbound(key, f"turn {i}", channel="web", dedupe_key=f"disk-{i}") for i in range(5)]
            gw.enqueue_system_event(key, "after the turns")
            assert all(a["recorded"] for a in answers)
            cluster.crash()
        with Gateway.open(cluster.url()) as gw:
            turns = [e for e in gw.events_after(0, limit=1000) if e["sessionKey"] == key]
            assert sorted(e["dedupeKey"] for e in turns if e.get("dedupeKey")) == [f"disk-{i}" for i in range(5)]
            assert [e["text"] for e in gw.peek_system_events(key)] == ["after the turns"]
    finally:
        cluster.execute("postgres", "ALTER SYSTEM RESET wal_writer_delay")
        cluster.execute("postgres", "ALTER SYSTEM RESET wal_writer_flush_after")
        cluster.execute("postgres", "SELECT pg_reload_conf()")


def test_a_drain_acknowledged_durably_is_settled_though_its_answer_could_not_be_proven_at_once(
    cluster: pg_cluster.PrivateCluster,
) -> None:
    """The acknowledgment of a leased delivery commits and reaches the disk, then the server dies in the
    flush that follows the commit and stays down longer than a write's own proof waits. The gateway must
    still find the entries gone, within the lease, and call the delivery settled: answering "failed" then
    would lose them (the client never gets a complete answer, and they are no longer queued).

    Made deterministic with a synchronous standby that does not exist: the flush's own commit waits for
    it forever, after the acknowledgment's WAL is on the local disk."""
    key = _key("settle-in-doubt")
    # Nothing but the acknowledgment's own flush may put its commit on disk (the WAL writer waits 10 s),
    # so that flush always has WAL to wait for, however the machine schedules the server's processes.
    cluster.execute("postgres", "ALTER SYSTEM SET wal_writer_delay = '10s'")
    cluster.execute("postgres", "ALTER SYSTEM SET wal_writer_flush_after = '1GB'")
    cluster.execute("postgres", "SELECT pg_reload_conf()")
    with Gateway.open(cluster.url(), timers=False) as gw:
        gw.put_session(key)
        for i in range(3):
            gw.enqueue_system_event(key, f"entry {i}")
        delivery = gw.deliver_system_events(key, lease_ms=60_000)
        assert [e["text"] for e in delivery.entries] == ["entry 0", "entry 1", "entry 2"]
        cluster.execute("postgres", "ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        cluster.execute("postgres", "SELECT pg_reload_conf()")
        wait_until(
            lambda: cluster.execute("postgres", "SHOW synchronous_standby_names") == [("nobody",)],
            what="the standby rule in effect",
        )
        outcome: dict[str, object] = {}

        def settle() -> None:
            try:
                outcome["settled"] = delivery.settle()
            except Exception as exc:
                outcome["error"] = exc

        t = threading.Thread(target=settle, daemon=True)
        try:
            t.start()

            def waiting() -> bool:
                assert not outcome, f"the acknowledgment ended without waiting for its flush: {outcome}"
                found = cluster.execute(
                    "postgres", "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
                )
                return found == [(1,)]

            wait_until(waiting, timeout=30, what="the acknowledgment's flush waiting on the standby")
        finally:
            # Written to postgresql.auto.conf only: the restart reads it, the waiting flush does not.
            for name in ("synchronous_standby_names", "wal_writer_delay", "wal_writer_flush_after"):
                cluster.execute("postgres", f"ALTER SYSTEM RESET {name}")
        cluster.halt("immediate")
        try:
            time.sleep(PROVE_WITHIN_S + 2)  # longer than the store's own proof waits for the server
        finally:
            cluster.resume()
        t.join(60)
        assert not t.is_alive(), "the settle hung"
        assert outcome == {"settled": True}, outcome
        assert gw.peek_system_events(key) == []  # acknowledged once, durably: nothing comes again
