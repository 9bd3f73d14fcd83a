"""A manager spawns a child, a person types straight into the child, the manager is told once,
reconciles with changesSince, and acts.

    python examples/manager_child_person.py [STORE_URL]

Uses a throwaway SQLite file unless a store URL is given.
"""

from __future__ import annotations

import sys
import tempfile

from sessionwatch import Gateway

MANAGER = "agent:main:main"


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{tempfile.mkdtemp()}/example.db"
    with Gateway.open(url) as gw:
        gw.put_session(MANAGER)
        wakes = []
        gw.subscribe_wakes(MANAGER, wakes.append)

        # 1. The manager delegates: spawning seeds its cursor at the child's spawn version.
        child = gw.call_tool(
            "sessions_spawn", {"label": "researcher", "task": "Survey retry libraries."}, caller=MANAGER
        )
        print(f"1. manager spawned {child['sessionKey']} at stateVersion {child['stateVersion']}")

        # 2. A person types into the child directly, twice.
        for text in ("Use tenacity, not backoff.", "And pin it below 10."):
            gw.inbound(child["sessionKey"], text, channel="telegram")
        print("2. a person typed two messages into the child")

        # 3. The manager's next turn drains its queue: exactly one notice, and one wake was pushed.
        notices = gw.drain_system_events(MANAGER)
        print(f"3. manager got {len(notices)} notice and {len(wakes)} wake:")
        for n in notices:
            print("   " + n["line"])
        assert len(notices) == 1 and len(wakes) == 1

        # 4. It reconciles with the exact delta the notice names, before acting.
        since = int(notices[0]["text"].rsplit(" ", 1)[1].rstrip("."))
        status = gw.call_tool(
            "session_status", {"sessionKey": child["sessionKey"], "changesSince": since}, caller=MANAGER
        )
        kinds = [e["kind"] for e in status["stateChanges"]["events"]]
        print(f"4. changesSince {since} -> {len(kinds)} events: {kinds}")

        # 5. Now it acts on fresh state. Its own message is an inter-session turn, not "another actor".
        sent = gw.call_tool(
            "sessions_send",
            {"sessionKey": child["sessionKey"], "message": "Noted: tenacity<10. Continue."},
            caller=MANAGER,
        )
        print(f"5. manager replied to the child ({sent['status']})")

        # 6. The drain acknowledged up to the notice's frozen watermark, and the second message came after
        #    it; but the manager's own read in step 4 returned both, which acknowledged them (beyond v1),
        #    so no redundant follow-up notice is waiting. The manager is in sync.
        follow_up = gw.drain_system_events(MANAGER)
        cursor = gw.cursors(watcher=MANAGER)[0]
        print(
            f"6. next turn: {len(follow_up)} follow-up notices; cursor at {cursor['lastSeen']}"
            f" of stateVersion {status['stateVersion']}, then {len(gw.peek_system_events(MANAGER))} pending"
        )
        assert follow_up == [] and cursor["lastSeen"] == status["stateVersion"]


if __name__ == "__main__":
    main()
