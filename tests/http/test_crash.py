"""kill -9 in the middle of a burst of human messages, then a restart: nothing lost, nothing duplicated."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from sessionwatch.notices import notice_text
from sessionwatch.store import open_store
from tests.support.waiting import wait_until

CHILDREN = 12  # below the 20-entry queue cap, so every pending notice must be in the queue


def _snapshot_store(url: str, watchers: list[str]) -> dict[str, Any]:
    """Read the store file directly (no Gateway, so no restart sweep runs)."""
    store = open_store(url)
    try:
        return {
            "cursors": sorted((c.watcher, c.target, c.last_seen, c.material) for c in store.cursors()),
            "queues": {w: [e.text for e in store.peek(w, _render)] for w in watchers},
            "events": [e.sequence for e in store.events_after(0, 100_000)],
        }
    finally:
        store.close()


def _render(target: str):  # type: ignore[no-untyped-def]
    from sessionwatch.notices import notice_template

    return notice_template(target)


def _all_events(http: httpx.Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        page = http.get("/v1/events", params={"after": after, "limit": 1000}).json()["events"]
        if not page:
            return out
        out += page
        after = page[-1]["sequence"]


def test_kill9_mid_burst_then_restart_rematerializes_every_notice(gateway_factory, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    gp = gateway_factory(url).start()
    manager, observer = "agent:crash:main", "agent:crash:observer"
    children: list[str] = []
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        for key in (manager, observer):
            assert http.put(f"/v1/sessions/{key}", json={}).status_code == 200
        for i in range(CHILDREN):
            res = http.post("/v1/tools/sessions_spawn", json={"label": f"c{i}"}, headers={"X-Session-Key": manager})
            children.append(res.json()["sessionKey"])
            assert http.post("/v1/watch", json={"watcher": observer, "target": children[-1]}).json()["watched"]
        # Some notices are already pending (and one acknowledged) before the burst.
        for child in children[:4]:
            http.post(f"/v1/sessions/{child}/inbound", json={"text": "before", "channel": "web"})
        http.post(f"/v1/sessions/{observer}/system-events/drain", json={})

    acked: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def burst(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=gp.url, timeout=5) as c:
            while not stop.is_set():
                child = rng.choice(children)
                try:
                    res = c.post(
                        f"/v1/sessions/{child}/inbound",
                        json={"text": f"human {rng.random()}", "channel": "telegram", "humanId": "ana"},
                    )
                except httpx.HTTPError:
                    return  # the gateway is gone
                assert res.status_code == 200, res.text
                body = res.json()
                assert body["recorded"] is True
                with lock:
                    acked.append((child, body["event"]["sequence"]))

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    with contextlib.suppress(AssertionError):  # checked below, after the threads have stopped
        wait_until(lambda: len(acked) >= 150, timeout=10, interval=0.005)
    gp.kill9()  # mid-burst: requests are in flight
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acked) >= 150

    before = _snapshot_store(url, [manager, observer])
    restarted = gateway_factory(url).start()
    with httpx.Client(base_url=restarted.url, timeout=10) as http:
        health = http.get("/v1/health").json()
        assert health["status"] == "ok"
        events = _all_events(http)
        sequences = [e["sequence"] for e in events]
        # Nothing lost, nothing invented: every acknowledged human message is in the log, once.
        assert sequences == before["events"] and len(set(sequences)) == len(sequences)
        by_seq = {e["sequence"]: e for e in events}
        for child, seq in acked:
            assert by_seq[seq]["sessionKey"] == child and by_seq[seq]["kind"] == "human_direct_message"

        cursors = http.get("/v1/cursors").json()["cursors"]
        after = sorted((c["watcher"], c["target"], c["lastSeen"], c["material"]) for c in cursors)
        assert after == before["cursors"], "the restart moved a cursor"
        heads = {child: http.get(f"/v1/sessions/{child}/state-version").json()["stateVersion"] for child in children}
        for watcher in (manager, observer):
            queue = [e["text"] for e in http.get(f"/v1/sessions/{watcher}/system-events").json()["entries"]]
            assert not [t for t, n in Counter(queue).items() if n > 1], "duplicated notice"
            pending = {
                c["target"]: c["lastSeen"] for c in cursors if c["watcher"] == watcher and c["material"] > c["lastSeen"]
            }
            # Exactly one notice per target with unacknowledged change, quoting the cursor's lastSeen.
            assert sorted(queue) == sorted(notice_text(t, last) for t, last in pending.items())
            assert set(before["queues"][watcher]) <= set(queue)
            # Every child a person typed into during the burst is pending for both watchers.
            touched = {child for child, _ in acked}
            assert touched <= set(pending)
            for c in cursors:
                if c["watcher"] == watcher and c["target"] in touched:
                    assert c["material"] == heads[c["target"]]
        assert health["swept"] == sum(1 for c in cursors if c["material"] > c["lastSeen"])

        # The watchers' next turns acknowledge everything (the sweep froze at material: no reopen).
        for watcher in (manager, observer):
            drained = http.post(f"/v1/sessions/{watcher}/system-events/drain", json={}).json()["entries"]
            assert len(drained) == len({t for w, t, ls, m in after if w == watcher and m > ls})
            assert http.get(f"/v1/sessions/{watcher}/system-events").json()["entries"] == []
        cursors = http.get("/v1/cursors").json()["cursors"]
        assert all(c["lastSeen"] == c["material"] for c in cursors)
