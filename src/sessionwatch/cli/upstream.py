"""Upstream commands: catalogs, adoption, links, monitor ticks and paired nodes."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console

from .app import State, cli, command, pass_state
from .backend import jsonable
from .output import emit, kv_table, record_table, table, ts


def _show(title: str, data: Any) -> Any:
    def human(c: Console) -> None:
        if isinstance(data, list):
            c.print(record_table(title, data) if data else f"{title}: none.")
        elif isinstance(data, dict):
            c.print(kv_table(title, data))
        else:
            c.print(str(data), markup=False)

    return human


def _show_tick(title: str, out: dict[str, Any], note: str | None = None) -> Any:
    def human(c: Console) -> None:
        head = {
            "tick": out.get("tick"),
            "status": out.get("status"),
            "started": ts(out.get("startedAt")),
            "finished": ts(out.get("finishedAt")),
        }
        if out.get("reason"):
            head["reason"] = out["reason"]
        c.print(kv_table(title, head))
        links = out.get("links") or []
        if links:  # every link, the skipped ones with their reason
            c.print(
                table(
                    "Links",
                    ["session", "catalog", "host", "thread", "status", "humanTurns", "sequence", "reason"],
                    [
                        [
                            x.get("sessionKey"),
                            x.get("catalogId"),
                            x.get("hostId"),
                            x.get("threadId"),
                            x.get("status"),
                            x.get("humanTurns"),
                            x.get("sequence"),
                            x.get("reason") or x.get("note"),
                        ]
                        for x in links
                    ],
                )
            )
        providers = out.get("providers") or []
        if providers:
            c.print(record_table("Providers", providers))
        if note:
            c.print(note, markup=False)

    return human


@command(cli, "threads")
@click.argument("catalog", metavar="CATALOG")
@pass_state
def threads_cmd(state: State, catalog: str) -> None:
    """List the threads of a catalog: claude, codex, pi, or node:<nodeId> for a paired node.

    The claude and codex catalogs list this machine's transcripts (roots from
    CLAUDE_CONFIG_DIR / CODEX_HOME) and those of every reachable paired node.

    \b
    Examples:
      sessionwatch threads claude
      sessionwatch threads codex --json
      sessionwatch threads node:laptop
    """
    out = jsonable(state.backend(read_only=True).list_threads(catalog))

    def human(c: Console) -> None:
        if not out:
            c.print(f"No threads in {catalog}.", markup=False)
            return
        c.print(
            table(
                f"Threads in {catalog}",
                ["catalog", "thread", "host", "updated", "title", "cwd"],
                [
                    [
                        t.get("catalogId"),
                        t.get("threadId"),
                        t.get("hostId"),
                        ts(t.get("updatedAt")),
                        t.get("title"),
                        t.get("cwd"),
                    ]
                    for t in out
                ],
            )
        )

    emit(state.json, {"catalog": catalog, "threads": out}, human)


@command(cli, "adopt")
@click.argument("catalog", metavar="CATALOG")
@click.argument("thread", metavar="THREAD")
@click.option("--session", "session_key", metavar="KEY", help="Session key to link it to (default: derived).")
@click.option("--agent", "agent_id", metavar="AGENT_ID", help="Agent that owns the adopted session.")
@click.option(
    "--host",
    "host_id",
    metavar="HOST",
    default="gateway:local",
    show_default=True,
    help="Where the thread lives: gateway:local, or node:<nodeId> for a paired node.",
)
@pass_state
def adopt_cmd(
    state: State, catalog: str, thread: str, session_key: str | None, agent_id: str | None, host_id: str
) -> None:
    """Adopt (continue) a catalog thread: link it to a session the monitor then checks.

    From then on a person typing into that thread directly records human_direct_message
    (watchers of the session get one notice). THREAD is the id 'threads' lists. The
    monitor scans only watched sessions: when nobody watches this one yet, the output
    says so and shows the 'watch' command to run.

    \b
    Examples:
      sessionwatch adopt claude 2b1f0c3e-8d7a-4c1e-9a55-0f6f1f2f7a10
      sessionwatch adopt codex 019a-rollout --session agent:main:subagent:codex-1
      sessionwatch adopt claude 2b1f0c3e-8d7a-4c1e-9a55-0f6f1f2f7a10 --host node:laptop
    """
    out = jsonable(
        state.backend().continue_thread(catalog, thread, session_key=session_key, agent_id=agent_id, host_id=host_id)
    )
    note = out.get("note") if isinstance(out, dict) else None

    def human(c: Console) -> None:
        c.print(kv_table(f"Adopted {catalog}/{thread}", {k: v for k, v in out.items() if k != "note"}))
        if note:  # nobody watches the session: say how to make the monitor scan it
            c.print(note, markup=False)

    emit(state.json, out, human)


@command(cli, "link")
@click.argument("key", metavar="KEY")
@click.option("--agent", "agent_id", metavar="AGENT_ID")
@pass_state
def link_cmd(state: State, key: str, agent_id: str | None) -> None:
    """Show the catalog link of session KEY (exit 3 when it has none).

    \b
    Examples:
      sessionwatch link agent:main:subagent:codex-1
    """
    out = state.backend(read_only=True).link(key, agent_id)
    emit(state.json, out, _show(f"Link of {key}", out))


@command(cli, "tick")
@pass_state
def tick_cmd(state: State) -> None:
    """Run one upstream monitor tick now (check every watched link once).

    Every link is listed; one that was not scanned says why (not watched, active run,
    ambiguous, another gateway ticking, ...).

    \b
    Examples:
      sessionwatch tick
      sessionwatch --gateway http://127.0.0.1:7878 tick --json
    """
    out = jsonable(state.backend().upstream_tick())
    emit(state.json, out, _show_tick("Upstream tick", out))


@command(cli, "upstream-results")
@pass_state
def upstream_results_cmd(state: State) -> None:
    """Show the per-link results of the gateway monitor's last tick.

    Meaningful with --gateway: a local CLI process runs no monitor (use 'tick').

    \b
    Examples:
      sessionwatch --gateway http://127.0.0.1:7878 upstream-results
      sessionwatch upstream-results --json
    """
    be = state.backend(read_only=True)
    out = jsonable(be.upstream_results())
    note = None if be.remote else "(local store: this process runs no monitor; 'tick' runs one now)"
    emit(state.json, out, _show_tick("Last upstream results", out, note))


@command(cli, "pair")
@click.argument("node_id", metavar="NODE_ID")
@click.argument("url", metavar="URL")
@click.option("--token", "node_token", required=True, metavar="TOKEN", help="The token the node was started with.")
@pass_state
def pair_cmd(state: State, node_id: str, url: str, node_token: str) -> None:
    """Pair a remote node (a machine running 'sessionwatch node') as catalog NODE_ID.

    \b
    Examples:
      sessionwatch pair laptop http://10.0.0.5:8765 --token "$NODE_TOKEN"
      sessionwatch threads node:laptop
    """
    out = jsonable(state.backend().pair_node(node_id, url, node_token))
    emit(state.json, out, _show(f"Paired {node_id}", out))
