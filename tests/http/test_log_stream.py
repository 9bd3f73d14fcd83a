"""The log stream ``GET /v1/events/stream`` against a real gateway process: ids, resume, gaps, filters, scope."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

A, B, OTHER = "agent:main:a", "agent:main:b", "agent:oth:x"


class Reader:
    """Reads one SSE connection on a thread; ``drop()`` cuts it like a network failure would."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, params: dict[str, str] | None = None):
        self.items: list[tuple[str, int | None, Any]] = []  # (event, id, data)
        self.ids: list[int] = []  # every id: line seen (also data-less ones)
        self.retry: int | None = None
        self.status: int | None = None
        self.opened = threading.Event()
        self._sock: socket.socket | None = None
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(10, read=None))
        self._thread = threading.Thread(target=self._run, args=(headers or {}, params or {}), daemon=True)
        self._thread.start()
        assert self.opened.wait(10)

    def _run(self, headers: dict[str, str], params: dict[str, str]) -> None:
        try:
            with self._client.stream("GET", "/v1/events/stream", headers=headers, params=params) as res:
                self.status = res.status_code
                self._sock = res.extensions["network_stream"].get_extra_info("socket")
                if res.status_code != 200:
                    res.read()
                    self.items.append(("error", None, res.json()))
                    return
                self.opened.set()
                event, data, ident = "message", [], None
                for line in res.iter_lines():
                    if line == "":
                        if ident is not None:
                            self.ids.append(ident)
                        if data:
                            self.items.append((event, ident, json.loads("\n".join(data))))
                        event, data, ident = "message", [], None
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif line.startswith("id:"):
                        ident = int(line[3:].strip())
                    elif line.startswith("retry:"):
                        self.retry = int(line[6:].strip())
        except (httpx.HTTPError, OSError, ValueError):
            pass
        finally:
            self.opened.set()

    def logs(self) -> list[dict[str, Any]]:
        return [d for ev, _, d in list(self.items) if ev == "log"]

    def wait_for(self, count: int, timeout: float = 15) -> list[dict[str, Any]]:
        """The log events so far, once there are ``count`` (or after ``timeout``: the caller compares)."""
        with contextlib.suppress(AssertionError):
            wait_until(lambda: len(self.logs()) >= count, timeout=timeout)
        return self.logs()

    def last_id(self) -> int:
        return self.ids[-1]

    def drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        self._client.close()


def _burst(url: str, count: int, headers: dict[str, str] | None = None) -> threading.Thread:
    def run() -> None:
        with httpx.Client(base_url=url, timeout=10, headers=headers or {}) as http:
            for i in range(count):
                key = A if i % 2 else B
                res = http.post(f"/v1/sessions/{key}/inbound", json={"text": f"m{i}", "channel": "cli"})
                assert res.status_code == 200, res.text

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _sessions(url: str, *keys: str, headers: dict[str, str] | None = None) -> None:
    """Create the sessions, each watching the next: a person's turn is only recorded in a watched session."""
    with httpx.Client(base_url=url, timeout=10, headers=headers or {}) as http:
        for key in keys:
            assert http.put(f"/v1/sessions/{key}", json={}).status_code == 200
        for watcher, target in zip(keys, keys[1:] + keys[:1], strict=True):
            if watcher != target:
                assert http.post("/v1/watch", json={"watcher": watcher, "target": target}).status_code == 200


def _all_events(url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return httpx.get(url + "/v1/events", params={"after": 0, "limit": 1000}, headers=headers or {}).json()["events"]


def test_a_stream_dropped_and_resumed_mid_burst_misses_and_repeats_nothing(gateway_factory) -> None:
    gp = gateway_factory().start()
    _sessions(gp.url, A, B)
    first = Reader(gp.url, params={"after": "0"})
    assert first.retry is None or first.retry > 0
    burst = _burst(gp.url, 240)
    got = first.wait_for(40)
    assert len(got) >= 40
    first.drop()  # mid-burst: the recorder is still writing
    seen = first.logs()
    assert first.retry and first.retry > 0  # the server told the client how long to wait
    resumed = Reader(gp.url, headers={"Last-Event-ID": str(first.last_id())}, params={"after": "0"})
    burst.join(60)
    expected = [e["sequence"] for e in _all_events(gp.url)]
    assert len(expected) == 240
    rest = resumed.wait_for(len(expected) - len(seen))
    resumed.drop()
    sequences = [e["sequence"] for e in seen + rest]
    assert sequences == expected  # every event once, in order: nothing missed, nothing repeated
    assert all(ident == e["sequence"] for (ev, ident, e) in first.items + resumed.items if ev == "log")


@pytest.mark.slow
def test_cli_log_follow_against_a_gateway_survives_a_restart(gateway_factory, tmp_path: Path) -> None:
    gp = gateway_factory().start()
    _sessions(gp.url, A, B)
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        for i in range(5):
            http.post(f"/v1/sessions/{A}/inbound", json={"text": f"before {i}", "channel": "cli"})
    out = open(tmp_path / "follow.jsonl", "wb")
    proc = subprocess.Popen(
        [*SESSIONWATCH, "--gateway", gp.url, "--json", "log", "--follow"], stdout=out, stderr=subprocess.PIPE
    )
    try:

        def lines() -> list[dict[str, Any]]:
            return [json.loads(x) for x in (tmp_path / "follow.jsonl").read_text().splitlines() if x.strip()]

        wait_until(lambda: len(lines()) >= 5, timeout=60, interval=0.05, what="the history")
        assert len(lines()) == 5  # the history first
        gp.stop(keep_socket=True)  # the stream ends; the follower waits the retry delay and reconnects
        gp.start()  # on the same socket
        with httpx.Client(base_url=gp.url, timeout=10) as http:
            for i in range(5):
                http.post(f"/v1/sessions/{A}/inbound", json={"text": f"after {i}", "channel": "cli"})
        wait_until(lambda: len(lines()) >= 10, timeout=60, interval=0.05, what="the events after the restart")
        assert [e["sequence"] for e in lines()] == [e["sequence"] for e in _all_events(gp.url)]
    finally:
        proc.terminate()
        proc.wait(10)
        out.close()


def test_gap_event_after_pruning_carries_the_changes_since_facts(gateway_factory) -> None:
    gp = gateway_factory(env={"SESSIONWATCH_MAX_EVENTS": "10"}).start()
    _sessions(gp.url, A, B)
    with GatewayClient(gp.url) as gw:
        for i in range(30):
            gw.inbound(A, f"turn {i}", channel="cli")
        gw.prune()
        remaining = gw.events_after(0, 1000)
        earliest = remaining[0]["sequence"]
        status = gw.call_tool("session_status", {"sessionKey": A, "changesSince": 3}, caller="agent:main:op")
    facts = status["stateChanges"]
    assert facts["historyGap"] is True
    reader = Reader(gp.url, headers={"Last-Event-ID": "3"})
    logs = reader.wait_for(len(remaining))
    reader.drop()
    gap = [d for ev, _, d in reader.items if ev == "gap"]
    assert gap == [
        {"historyGap": True, "earliestAvailableSequence": earliest, "after": 3, "prunedThrough": earliest - 1}
    ]
    assert gap[0]["earliestAvailableSequence"] == facts["earliestAvailableSequence"]
    assert reader.items[0][0] == "gap"  # said before the events that remain
    assert [e["sequence"] for e in logs] == [e["sequence"] for e in remaining]
    # a reader that is not behind retention gets no gap
    calm = Reader(gp.url, headers={"Last-Event-ID": str(earliest)})
    calm.wait_for(len(remaining) - 1)
    calm.drop()
    assert [ev for ev, _, _ in calm.items] == ["log"] * (len(remaining) - 1)


def test_filters_and_a_scoped_token_narrow_the_stream(gateway_factory, tmp_path: Path) -> None:
    admin = "admin-token-for-the-log-stream-0123456789"
    store_url = f"sqlite:///{tmp_path}/state.db"
    store = open_store(store_url)
    own, _ = create_token(store, agents=["main"])
    store.close()
    gp = gateway_factory(store_url, token=admin).start()
    auth = {"Authorization": f"Bearer {admin}"}
    mine = {"Authorization": f"Bearer {own}"}
    _sessions(gp.url, A, B, OTHER, headers=auth)
    readers = {
        "own": Reader(gp.url, headers=mine, params={"after": "0"}),
        "session": Reader(gp.url, headers=auth, params={"after": "0", "session": B}),
        "kind": Reader(gp.url, headers=auth, params={"after": "0", "kind": "goal_changed"}),
        "agent": Reader(gp.url, headers=auth, params={"after": "0", "agent": "oth"}),
    }
    with GatewayClient(gp.url, token=admin) as gw:
        gw.inbound(A, "to a", channel="cli")
        gw.inbound(B, "to b", channel="cli")
        gw.inbound(OTHER, "other team's secret", channel="cli")
        gw.set_goal(B, "create", objective="ship")
        everything = gw.events_after(0, 1000)
    want = {
        "own": [e for e in everything if e["agentId"] == "main"],
        "session": [e for e in everything if e["sessionKey"] == B],
        "kind": [e for e in everything if e["kind"] == "goal_changed"],
        "agent": [e for e in everything if e["agentId"] == "oth"],
    }
    for name, reader in readers.items():
        reader.wait_for(len(want[name]), timeout=10)
        time.sleep(0.3)  # a window for an event the filter should have kept out: none may arrive in it
        reader.drop()
        assert [e["sequence"] for e in reader.logs()] == [e["sequence"] for e in want[name]], name
    assert all("secret" not in json.dumps(e) for e in readers["own"].logs())
    # a scoped token may not ask for another agent's log; no token at all is refused
    refused = Reader(gp.url, headers=mine, params={"agent": "oth"})
    assert refused.status == 403
    assert Reader(gp.url, params={}).status == 401
    bad = Reader(gp.url, headers={**auth, "Last-Event-ID": "x1"})
    assert bad.status == 400 and bad.items[0][2]["error"]["code"] == "invalid_argument"
    assert Reader(gp.url, headers=auth, params={"kind": "nope"}).status == 400


def test_a_fresh_stream_starts_at_the_head(gateway_factory) -> None:
    gp = gateway_factory().start()
    _sessions(gp.url, A, B)
    with GatewayClient(gp.url) as gw:
        gw.inbound(A, "old", channel="cli")
        head = gw.events_after(0, 1000)[-1]["sequence"]
        reader = Reader(gp.url)
        wait_until(lambda: reader.ids, what="the stream's starting id")  # it has fixed where it starts
        gw.inbound(A, "new", channel="cli")
        got = reader.wait_for(1)
        reader.drop()
        newest = gw.events_after(0, 1000)[-1]["sequence"]
    assert [e["sequence"] for e in got] == [newest] and newest > head
    assert reader.ids[0] == head  # the first (data-less) id is where it started: a reconnect resumes there
    assert sys.version_info >= (3, 11)


@pytest.mark.postgres
def test_two_postgres_gateways_stream_one_log_and_resume_across_them(gateway_factory) -> None:
    """On PostgreSQL a stream dropped from one gateway resumes on another, with nothing missed or repeated."""
    pg = pytest.importorskip("tests.support.pg")
    if not pg.available():
        pytest.skip("PostgreSQL not reachable")
    with pg.fresh_database() as url:
        one, two = gateway_factory(url).start(), gateway_factory(url).start()
        _sessions(one.url, A, B)
        first = Reader(one.url, params={"after": "0"})
        burst = _burst(two.url, 120)  # recorded through the other gateway
        assert len(first.wait_for(20)) >= 20
        first.drop()
        resumed = Reader(two.url, headers={"Last-Event-ID": str(first.last_id())})
        burst.join(60)
        expected = [e["sequence"] for e in _all_events(one.url)]
        assert len(expected) == 120
        rest = resumed.wait_for(len(expected) - len(first.logs()))
        resumed.drop()
        assert [e["sequence"] for e in first.logs() + rest] == expected


@pytest.mark.parametrize("how", ["Last-Event-ID", "after"])
def test_a_resumed_stream_starts_strictly_after_the_id_it_was_given(gateway_factory, how: str) -> None:
    """Resumed after N, the first id a client reads is N+1's: no line names N again (not even a data-less
    one), so a client that counts ids sees no repeat."""
    gp = gateway_factory().start()
    _sessions(gp.url, A, B)  # watched: a person's turn is recorded
    with GatewayClient(gp.url) as gw:
        for i in range(6):
            gw.inbound(A, f"turn {i}", channel="cli")
        seqs = [e["sequence"] for e in gw.events_after(0, 1000)]
    given = seqs[2]
    headers, params = ({"Last-Event-ID": str(given)}, {}) if how == "Last-Event-ID" else ({}, {"after": str(given)})
    reader = Reader(gp.url, headers=headers, params=params)
    got = reader.wait_for(len(seqs) - 3)
    reader.drop()
    assert [e["sequence"] for e in got] == seqs[3:]
    assert reader.ids and reader.ids[0] == seqs[3] and all(i > given for i in reader.ids)
