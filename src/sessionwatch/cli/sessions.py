"""Everyday commands: sessions, status, send, watch, drain, log, prune, put, inbound, lifecycle, cursors."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidArgument
from ..keys import parse_key
from ..kinds import END_OUTCOMES, LIFECYCLE_STATES, REPORTED_STATES
from .app import State, cli, command, pass_state
from .interrupt import StopOnInterrupt
from .output import console, emit, event_line, kv_table, print_jsonl, table, ts

if TYPE_CHECKING:
    from rich.console import Console  # rich loads only when a table is shown (output.py)

KEY = click.argument("key", metavar="KEY")
AGENT = click.option(
    "--agent",
    "agent_id",
    metavar="AGENT_ID",
    help="Agent that owns the session (needed only for the bare 'global' key).",
)


@command(cli, "sessions")
@click.option("--limit", type=click.IntRange(1, 1000), default=200, show_default=True, help="Sessions per page.")
@click.option("--agent", "agent_id", metavar="AGENT_ID", help="Only sessions of this agent.")
@click.option("--cursor", metavar="CURSOR", help="Show the page after this one (the nextCursor a listing printed).")
@click.option("--all", "walk_all", is_flag=True, help="Walk every page and show every session.")
@click.option(
    "--lifecycle",
    "states",
    multiple=True,
    type=click.Choice(LIFECYCLE_STATES),
    help="Only sessions in this lifecycle state (repeat for several).",
)
@pass_state
def sessions_cmd(
    state: State, limit: int, agent_id: str | None, cursor: str | None, walk_all: bool, states: tuple[str, ...]
) -> None:
    """List sessions (newest created first) with kind, spawn parent, stateVersion, lifecycle state and
    pending notices.

    Pending is the number of entries waiting in the session's system-event queue
    (notices it has not consumed yet). When more sessions follow, the listing ends
    with the command that shows the next page (--json: the nextCursor field).

    \b
    Examples:
      sessionwatch sessions
      sessionwatch sessions --agent main --json
      sessionwatch sessions --lifecycle waiting --lifecycle lost
      sessionwatch sessions --limit 50 --cursor <nextCursor of the previous page>
      sessionwatch sessions --all --json
    """
    be = state.backend(read_only=True)
    wanted = list(states) or None
    page = be.list_sessions_page(limit=limit, agent_id=agent_id, cursor=cursor, lifecycle=wanted)
    rows = list(page["sessions"])
    next_cursor = page.get("nextCursor")
    while walk_all and next_cursor:
        page = be.list_sessions_page(limit=limit, agent_id=agent_id, cursor=next_cursor, lifecycle=wanted)
        rows += page["sessions"]
        next_cursor = page.get("nextCursor")
    for r in rows:
        r.setdefault("stateVersion", 0)
        r["pending"] = len(be.peek_system_events(r["sessionKey"], agent_id=r.get("agentId")))

    def human(c: Console) -> None:
        if not rows:
            c.print("No sessions.")
        else:
            c.print(
                table(
                    f"Sessions ({be.where})",
                    ["key", "kind", "parent", "stateVersion", "state", "pending"],
                    [
                        [
                            r["sessionKey"],
                            r.get("kind"),
                            r.get("spawnedBy"),
                            r["stateVersion"],
                            state_cell(r.get("lifecycle")),
                            r["pending"],
                        ]
                        for r in rows
                    ],
                )
            )
        if next_cursor:
            again = ["sessionwatch", "sessions", "--limit", str(limit)] + (["--agent", agent_id] if agent_id else [])
            again += [arg for s in states for arg in ("--lifecycle", s)]
            c.print(f"More sessions: {' '.join(again)} --cursor {next_cursor}", soft_wrap=True)

    out: dict[str, Any] = {"sessions": rows}
    if next_cursor:
        out["nextCursor"] = next_cursor
    emit(state.json, out, human)


@command(cli, "status")
@KEY
@click.option(
    "--since",
    type=click.IntRange(min=0),
    metavar="N",
    help="Also show the typed changes after sequence N (the number in a stale notice).",
)
@click.option("--as", "caller", metavar="CALLER", help="Ask as this session (default: KEY itself).")
@AGENT
@pass_state
def status_cmd(state: State, key: str, since: int | None, caller: str | None, agent_id: str | None) -> None:
    """Show a session's status; with --since N, exactly what changed after N.

    Runs the session_status tool. Asked as KEY itself (the default) it moves no
    cursor; asked --as a watcher of KEY with --since, the watcher has then seen
    what it was shown (its cursor moves, a notice that covers it is withdrawn).

    \b
    Examples:
      sessionwatch status agent:main:main
      sessionwatch status agent:main:subagent:researcher --since 4
      sessionwatch status agent:main:subagent:researcher --since 4 --json
    """
    parse_key(key, "KEY")  # name the argument in the error, not the caller it defaults to
    args: dict[str, Any] = {"sessionKey": key}
    if since is not None:
        args["changesSince"] = since
    out = state.backend(read_only=True).tool("session_status", args, caller=caller or key, agent_id=agent_id)

    def human(c: Console) -> None:
        shown = ("sessionKey", "agentId", "sessionId", "kind", "stateVersion", "spawnedBy", "activeRunId", "goal")
        info: dict[str, Any] = {k: out[k] for k in shown if k in out}
        c.print(kv_table(f"Session {out['sessionKey']}", info))
        changes = out.get("stateChanges")
        if changes is None:
            return
        events = changes.get("events", [])
        if events:
            c.print(
                table(
                    f"Changes after {since}",
                    ["seq", "time", "kind", "actor", "summary"],
                    [
                        [
                            e["sequence"],
                            ts(e.get("occurredAt")),
                            e["kind"],
                            e.get("actorType", "") + (f":{e['actorId']}" if e.get("actorId") else ""),
                            e.get("summary"),
                        ]
                        for e in events
                    ],
                )
            )
        else:
            c.print(f"No changes after {since}.")
        if changes.get("truncated"):
            c.print("[yellow]More changes exist: ask again with --since set to the last sequence shown.[/]")
        if changes.get("historyGap"):
            c.print(f"[yellow]History gap: events before {changes.get('earliestAvailableSequence')} were pruned.[/]")

    emit(state.json, out, human)


@command(cli, "send")
@KEY
@click.argument("message")
@click.option("--as", "caller", required=True, metavar="CALLER", help="The sending session (must exist).")
@click.option("--watch", is_flag=True, help="Also watch KEY from now on (sessions_send watch: true).")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 600),
    default=0,
    show_default=True,
    metavar="S",
    help="Wait up to S seconds for KEY's next assistant reply.",
)
@pass_state
def send_cmd(state: State, key: str, message: str, caller: str, watch: bool, timeout: float) -> None:
    """Send MESSAGE into session KEY as an inter-session turn from CALLER.

    \b
    Examples:
      sessionwatch send agent:main:subagent:researcher "Use the 2024 data" --as agent:main:main
      sessionwatch send agent:main:subagent:researcher "Status?" --as agent:main:main --watch --timeout 30
    """
    args: dict[str, Any] = {"sessionKey": key, "message": message}
    if watch:
        args["watch"] = True
    if timeout:
        args["timeoutSeconds"] = timeout
    out = state.backend().tool("sessions_send", args, caller=caller)
    emit(state.json, out, lambda c: c.print(out.get("text", ""), markup=False))


@command(cli, "watch")
@click.argument("target", metavar="TARGET")
@click.option("--as", "watcher", required=True, metavar="WATCHER", help="The session that watches TARGET.")
@AGENT
@pass_state
def watch_cmd(state: State, target: str, watcher: str, agent_id: str | None) -> None:
    """Make WATCHER watch TARGET, starting at TARGET's current stateVersion.

    WATCHER then gets one coalesced notice when another actor changes TARGET.
    Both keys must be agent-qualified (agent:<agentId>:<rest>).

    \b
    Examples:
      sessionwatch watch agent:ops:telegram:group:room-1 --as agent:ops:main
    """
    done = state.backend().watch(watcher, target, agent_id)
    out = {"watcher": watcher, "target": target, "watching": done}
    emit(
        state.json,
        out,
        lambda c: c.print(
            f"{watcher} watches {target}." if done else f"{watcher} cannot watch {target} (not agent-qualified?).",
            markup=False,
        ),
    )


@command(cli, "unwatch")
@click.argument("target", metavar="TARGET")
@click.option("--as", "watcher", required=True, metavar="WATCHER", help="The session that stops watching.")
@pass_state
def unwatch_cmd(state: State, target: str, watcher: str) -> None:
    """Make WATCHER stop watching TARGET (drops its cursor and pending notice).

    Also mutes spawn-parent notices for the pair until WATCHER watches TARGET again.

    \b
    Examples:
      sessionwatch unwatch agent:main:subagent:researcher --as agent:main:main
    """
    out = state.backend().tool("session_unwatch", {"sessionKey": target}, caller=watcher)
    emit(state.json, out, lambda c: c.print(out.get("text", ""), markup=False))


@command(cli, "drain")
@KEY
@AGENT
@pass_state
def drain_cmd(state: State, key: str, agent_id: str | None) -> None:
    """Consume KEY's pending system events (this is the acknowledgment).

    Prints each 'System: [...] ...' line, the way a harness would prepend them to
    the session's next turn, and acknowledges them once printed: if printing
    fails (a closed pipe), they stay queued for the next drain.

    \b
    Examples:
      sessionwatch drain agent:main:main
      sessionwatch drain agent:main:main --json
    """
    backend = state.backend()
    backend.get_session(key, agent_id)  # a typo'd key is not_found (exit 3), not "nothing pending"
    entries = backend.peek_system_events(key, agent_id=agent_id)

    def human(c: Console) -> None:
        if not entries:
            c.print(f"No pending system events for {key}.", markup=False)
        for e in entries:
            c.print(e.get("line", ""), markup=False)

    emit(state.json, {"sessionKey": key, "events": entries}, human)
    if entries:  # print, then acknowledge: what was never shown is never consumed
        sys.stdout.flush()
        backend.ack_system_events(key, [e["id"] for e in entries], agent_id=agent_id)


@command(cli, "log")
@click.option(
    "--since", type=click.IntRange(min=0), default=0, show_default=True, metavar="N", help="Start after sequence N."
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they are recorded (Ctrl-C stops).")
@click.option(
    "--interval",
    type=click.FloatRange(0.05, 60),
    default=0.5,
    show_default=True,
    metavar="S",
    help="Polling interval for --follow on a local store (against --gateway the log is streamed).",
)
@pass_state
def log_cmd(state: State, since: int, follow: bool, interval: float) -> None:
    """Print the signal log of every session, oldest first; --follow tails it live.

    One line per event: sequence, time, session, kind, actor and summary. With --json,
    one JSON object per line (JSON Lines), ready for jq.

    \b
    Examples:
      sessionwatch log
      sessionwatch log --since 120
      sessionwatch log --follow --json | jq .kind
    """
    be = state.backend(read_only=True)
    c = console()
    after = since
    try:
        if follow and be.remote:  # a gateway pushes the log: its stream, resumed after a drop
            for e in be.follow_log(after):
                if "sequence" not in e:  # a gap: retention removed events we had not printed
                    click.echo(
                        f"warning: events after {e['after']} up to {e['prunedThrough']} were pruned; "
                        f"the log resumes at {e['earliestAvailableSequence']}",
                        err=True,
                    )
                elif state.json:
                    print_jsonl(e)
                else:
                    c.print(event_line(e), markup=False)
            return
        with StopOnInterrupt() as stop:
            while not stop.stopped:
                batch = be.events_after(after, 200)
                for e in batch:
                    if state.json:
                        print_jsonl(e)
                    else:
                        c.print(event_line(e), markup=False)
                    after = max(after, int(e["sequence"]))
                if len(batch) == 200:
                    continue
                if not follow:
                    return
                stop.wait(interval)
    except KeyboardInterrupt:
        return


@command(cli, "prune")
@pass_state
def prune_cmd(state: State) -> None:
    """Apply retention now (30 days / 50,000 rows by default) and drop orphaned cursors.

    \b
    Examples:
      sessionwatch prune
    """
    out = state.backend().prune()
    emit(state.json, out, lambda c: c.print(kv_table("Prune", out)))


@command(cli, "put")
@KEY
@AGENT
@click.option(
    "--kind",
    type=click.Choice(["main", "direct", "group", "subagent", "cron", "other"]),
    help="Session kind (inferred from KEY when omitted).",
)
@click.option("--spawned-by", metavar="PARENT", help="The session that spawned this one.")
@click.option("--label", help="A short label.")
@pass_state
def put_cmd(
    state: State, key: str, agent_id: str | None, kind: str | None, spawned_by: str | None, label: str | None
) -> None:
    """Create session KEY (or update its kind, parent or label).

    \b
    Examples:
      sessionwatch put agent:main:main
      sessionwatch put agent:ops:telegram:group:room-1 --label "ops room"
      sessionwatch put global --agent ops
    """
    out = state.backend().put_session(key, agent_id=agent_id, kind=kind, spawned_by=spawned_by, label=label)
    emit(
        state.json,
        out,
        lambda c: c.print(
            kv_table(("Created " if out.get("created") else "Updated ") + out.get("sessionKey", key), out)
        ),
    )


@command(cli, "inbound")
@KEY
@click.argument("text")
@click.option("--channel", required=True, help="Where the turn came from (webchat, telegram, ...).")
@click.option(
    "--provenance",
    type=click.Choice(["external_user", "inter_session", "internal_system"]),
    help="Who sent it; omitted means a person.",
)
@click.option("--source", "source_session_key", metavar="KEY", help="Sending session for inter_session turns.")
@click.option("--human-id", help="Identifier of the person.")
@click.option("--lane", help="'subagent' marks the parent's own dispatch (never a human message).")
@AGENT
@pass_state
def inbound_cmd(
    state: State,
    key: str,
    text: str,
    channel: str,
    provenance: str | None,
    source_session_key: str | None,
    human_id: str | None,
    lane: str | None,
    agent_id: str | None,
) -> None:
    """Record a turn arriving in session KEY (by default: a person typing).

    A person's turn in a session with a spawn parent or a watcher records
    human_direct_message, and the watchers get one stale notice.

    \b
    Examples:
      sessionwatch inbound agent:main:subagent:researcher "Stop, use the new brief" --channel webchat
      sessionwatch inbound agent:ops:telegram:group:room-1 "deploy is done" --channel telegram --human-id ana
    """
    if provenance == "inter_session" and not source_session_key:
        raise InvalidArgument("--provenance inter_session needs --source KEY")
    out = state.backend().inbound(
        key,
        text,
        channel=channel,
        provenance=provenance,
        source_session_key=source_session_key,
        human_id=human_id,
        lane=lane,
        agent_id=agent_id,
    )

    def human(c: Console) -> None:
        ev = out.get("event")
        c.print(
            f"Recorded {ev['kind']} #{ev['sequence']} in {key}."
            if ev
            else f"Stored the turn in {key}; no signal recorded (actor {out.get('actorType')}, or nobody watches it).",
            markup=False,
        )

    emit(state.json, out, human)


def state_cell(lifecycle: dict[str, Any] | None) -> str:
    """``waiting since <time>`` (``-`` for a session that never reported a state)."""
    if not lifecycle:
        return "-"
    outcome = lifecycle.get("outcome")
    name = f"{lifecycle['state']} ({outcome})" if outcome and outcome != "ok" else lifecycle["state"]
    return f"{name} since {ts(lifecycle.get('since'))}"


@command(cli, "lifecycle")
@KEY
@click.argument("lifecycle_state", metavar="STATE", type=click.Choice(REPORTED_STATES))
@click.option("--pid", type=click.IntRange(1, 2**31 - 1), help="The host process (lost only once it is gone).")
@click.option("--host", "host_name", metavar="HOST", help="The host program (claude, codex, ...).")
@click.option("--outcome", type=click.Choice(END_OUTCOMES), help="How it ended (STATE ended only).")
@click.option("--machine", metavar="NAME", help="Where --pid runs (default: this machine).")
@AGENT
@pass_state
def lifecycle_cmd(
    state: State,
    key: str,
    lifecycle_state: str,
    pid: int | None,
    host_name: str | None,
    outcome: str | None,
    machine: str | None,
    agent_id: str | None,
) -> None:
    """Report what session KEY is doing: working, waiting (on a person), idle or ended.

    A change records one typed event (session_working, ...). An end tells the spawn
    parent and the watchers once; a session working or waiting that reports nothing
    for SESSIONWATCH_LOST_AFTER_MS (10 minutes) becomes lost and tells them too.

    \b
    Examples:
      sessionwatch lifecycle agent:main:subagent:kid working --pid 4242 --host claude
      sessionwatch lifecycle agent:main:subagent:kid ended --outcome failed
    """
    if pid is not None and machine is None:
        from ..engine.lifecycle import this_machine

        machine = this_machine()  # the CLI's machine, also when it talks to a remote gateway
    out = state.backend().report_lifecycle(
        key, lifecycle_state, agent_id=agent_id, pid=pid, host=host_name, machine=machine, outcome=outcome
    )

    def human(c: Console) -> None:
        shown_state = state_cell(out.get("lifecycle"))
        if out.get("changed"):
            kinds = ", ".join(f"{e['kind']} #{e['sequence']}" for e in out.get("events", []))
            c.print(f"{key}: {shown_state} (recorded {kinds or 'nothing'}).", markup=False)
        elif out.get("stale"):
            c.print(f"{key}: still {shown_state}; the report was older than that state (ignored).", markup=False)
        else:
            c.print(f"{key}: still {shown_state}.", markup=False)

    emit(state.json, out, human)


@command(cli, "cursors")
@click.option("--watcher", metavar="KEY", help="Only cursors of this watcher.")
@click.option("--target", metavar="KEY", help="Only cursors on this target.")
@pass_state
def cursors_cmd(state: State, watcher: str | None, target: str | None) -> None:
    """List watch cursors: who watches whom, and how far each has seen.

    \b
    Examples:
      sessionwatch cursors
      sessionwatch cursors --watcher agent:main:main --json
    """
    rows = state.backend(read_only=True).cursors(watcher=watcher, target=target)

    def human(c: Console) -> None:
        if not rows:
            c.print("No cursors.")
            return
        c.print(
            table(
                "Cursors",
                ["watcher", "target", "lastSeen", "notified", "material", "provenance", "updated"],
                [
                    [
                        r.get("watcher"),
                        r.get("target"),
                        r.get("lastSeen"),
                        r.get("notified"),
                        r.get("material"),
                        r.get("provenance"),
                        ts(r.get("updatedAt")),
                    ]
                    for r in rows
                ],
            )
        )

    emit(state.json, {"cursors": rows}, human)
