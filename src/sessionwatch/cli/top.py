"""``sessionwatch top``: a live terminal view of the sessions' lifecycle states (waiting first), the stale
pairs and the tail of the signal log."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..http.runtime import redact_url
from ..notices import target_from_context_key
from .app import State, cli, command, pass_state
from .backend import Backend
from .interrupt import StopOnInterrupt
from .output import console, print_json, table, ts

PAGE = 1000  # the largest page the log read allows
STATES_SHOWN = 20  # sessions listed by state in a frame (the counts cover them all)
# The order sessions are shown in: who needs a person first, then what may need looking after.
STATE_ORDER = ("waiting", "lost", "working", "idle", "ended")


class Snapshot:
    """What one frame shows. Follows the log across frames, so a refresh reads only the new events."""

    def __init__(self, backend: Backend, tail: int) -> None:
        self.backend = backend
        self.after = 0
        self.events: deque[dict[str, Any]] = deque(maxlen=tail)
        self.stale: list[dict[str, Any]] = []
        self.cursors = 0
        self.taken_at = 0
        self.states: list[dict[str, Any]] = []
        self.state_counts: dict[str, int] = {}

    def refresh(self) -> None:
        be = self.backend
        while True:  # the first frame pages through the log once; later frames read what is new
            batch = be.events_after(self.after, PAGE)
            self.events.extend(batch)
            if batch:
                self.after = max(self.after, max(int(e["sequence"]) for e in batch))
            if len(batch) < PAGE:
                break
        cursors = be.cursors()
        self.cursors = len(cursors)
        stale = [c for c in cursors if int(c["material"]) > int(c["lastSeen"])]
        notices: dict[tuple[str, str], str] = {}
        for watcher in sorted({c["watcher"] for c in stale}):
            for entry in be.peek_system_events(watcher):  # a view: nothing is consumed
                target = target_from_context_key(entry.get("contextKey"))
                if target is not None:
                    notices[(watcher, target)] = entry["text"]
        self.stale = [
            {
                "watcher": c["watcher"],
                "target": c["target"],
                "lastSeen": c["lastSeen"],
                "material": c["material"],
                "behind": int(c["material"]) - int(c["lastSeen"]),
                "notice": notices.get((c["watcher"], c["target"])),
            }
            for c in sorted(stale, key=lambda c: (c["watcher"], c["target"]))
        ]
        self._refresh_states()
        self.taken_at = int(time.time() * 1000)

    def _refresh_states(self) -> None:
        """Sessions that reported a lifecycle state (one listing page of at most 1000), waiting first."""
        listed = self.backend.list_sessions_page(limit=PAGE, lifecycle=list(STATE_ORDER))["sessions"]
        rows = [
            {"sessionKey": r["sessionKey"], "agentId": r["agentId"], "spawnedBy": r.get("spawnedBy"), **r["lifecycle"]}
            for r in listed
            if r.get("lifecycle")
        ]
        rows.sort(key=lambda r: (STATE_ORDER.index(r["state"]), r["since"]))
        self.state_counts = {s: n for s in STATE_ORDER if (n := sum(1 for r in rows if r["state"] == s))}
        self.states = rows

    def to_json(self) -> dict[str, Any]:
        return {
            "lifecycle": self.state_counts,
            "sessions": self.states,
            "stale": self.stale,
            "cursors": self.cursors,
            "log": list(self.events),
            "lastSequence": self.after,
            "at": self.taken_at,
        }

    def render(self, where: str) -> Group:
        head = Text.assemble(
            ("sessionwatch top", "bold"),
            f"  {redact_url(where)}  ",
            (ts(self.taken_at), "dim"),
            f"  {len(self.stale)} stale of {self.cursors} pairs  last sequence {self.after}",
            "  " + "  ".join(f"{n} {s}" for s, n in self.state_counts.items()),
        )
        if self.states:
            shown = self.states[:STATES_SHOWN]
            more = len(self.states) - len(shown)
            states: Table = table(
                "Sessions by state (waiting first)" + (f", {more} more" if more else ""),
                ["session", "state", "since", "parent"],
                [
                    [
                        r["sessionKey"],
                        r["state"] + (f" ({r['outcome']})" if r.get("outcome") not in (None, "ok") else ""),
                        ts(r["since"]),
                        r.get("spawnedBy") or "-",
                    ]
                    for r in shown
                ],
            )
        else:
            states = table("Sessions by state", ["state"], [["no session reported a state"]])
        if self.stale:
            pairs: Table = table(
                "Stale pairs (material > lastSeen)",
                ["watcher", "target", "lastSeen", "material", "behind", "pending notice"],
                [
                    [s["watcher"], s["target"], s["lastSeen"], s["material"], s["behind"], s["notice"] or "-"]
                    for s in self.stale
                ],
            )
        else:
            pairs = table("Stale pairs", ["state"], [["no watcher is behind"]])
        log = table(
            "Log tail",
            ["seq", "time", "session", "kind", "actor", "summary"],
            [
                [
                    e["sequence"],
                    ts(e.get("occurredAt")),
                    e["sessionKey"],
                    e["kind"],
                    e.get("actorId") or e.get("actorType"),
                    e.get("summary"),
                ]
                for e in self.events
            ],
        )
        return Group(head, states, pairs, log)


@command(cli, "top")
@click.option("--once", is_flag=True, help="Print one frame and exit (with --json: the frame as JSON).")
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds between refreshes.",
)
@click.option(
    "--tail", type=click.IntRange(1, 1000), default=15, show_default=True, metavar="N", help="Log events shown."
)
@pass_state
def top_cmd(state: State, once: bool, interval: float, tail: int) -> None:
    """A live view of the sessions by lifecycle state (waiting first), the stale pairs
    (with their pending notice) and the log tail.

    Reads only: a local store is opened read-only; with --gateway it reads the gateway.
    Ctrl-C quits.

    \b
    Examples:
      sessionwatch top
      sessionwatch top --once
      sessionwatch top --once --json | jq '.stale'
      sessionwatch --gateway http://127.0.0.1:7878 --token $T top --interval 2
    """
    be = state.backend(read_only=True)
    snap = Snapshot(be, tail)
    snap.refresh()
    if once:
        if state.json:
            print_json(snap.to_json())
        else:
            console().print(snap.render(be.where))
        return
    from rich.live import Live

    try:
        with (
            StopOnInterrupt() as stop,
            Live(snap.render(be.where), console=console(), refresh_per_second=4, screen=False) as live,
        ):
            while not stop.wait(interval):
                snap.refresh()
                live.update(snap.render(be.where))
    except KeyboardInterrupt:
        return
