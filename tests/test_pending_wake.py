"""``Gateway.pending_wake``: what a (re)connecting wake stream gets at once."""

from __future__ import annotations

from pathlib import Path

from sessionwatch import Gateway


def test_pending_wake_names_the_newest_stale_target_and_only_when_one_is_queued(tmp_path: Path) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/w.db", timers=False) as gw:
        manager, a, b = "agent:pw:main", "agent:pw:worker-a", "agent:pw:worker-b"
        for key in (manager, a, b):
            gw.put_session(key)
        gw.watch(manager, a)
        gw.watch(manager, b)
        assert gw.pending_wake(manager) is None
        gw.enqueue_system_event(manager, "a plain note")  # not a stale notice: no wake
        assert gw.pending_wake(manager) is None
        gw.inbound(a, "first", channel="web")
        gw.inbound(b, "second", channel="web")
        wake = gw.pending_wake(manager)
        assert wake is not None and wake.watcher == manager and wake.target == b and not wake.trailing
        assert wake.reason == f"session-state:{b}"
        gw.drain_system_events(manager)
        assert gw.pending_wake(manager) is None
        assert gw.pending_wake("agent:pw:subagent:kid") is None  # subagents are never woken
