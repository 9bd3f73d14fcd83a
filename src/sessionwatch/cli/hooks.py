"""Host integration commands: hook (run by Claude Code / Codex CLI), install and uninstall."""

from __future__ import annotations

from typing import Any

import click

from .app import State, cli, command, pass_state

HOST = click.argument("host", metavar="HOST", type=click.Choice(["claude-code", "codex"]))


@command(cli, "hook")
@HOST
@click.option(
    "--session",
    "session_key",
    metavar="KEY",
    help="The sessionwatch session this host session stands for. Env: SESSIONWATCH_SESSION. "
    "Default: the session whose adoption link is this thread.",
)
@click.option("--agent", "agent_id", metavar="AGENT_ID", help="Agent of the session (only for bare 'global').")
@click.option("--no-nudge", is_flag=True, help="Do not nudge the upstream monitor on UserPromptSubmit.")
@click.option(
    "--nudge-wait",
    type=click.IntRange(0, 10_000),
    default=2000,
    show_default=True,
    metavar="MS",
    help="How long the nudge keeps looking for the prompt's transcript row.",
)
@click.option(
    "--foreground-nudge", is_flag=True, help="Nudge before exiting instead of in a detached child (slower answer)."
)
@click.option(
    "--log-file", metavar="PATH", help="Where the hook logs (default: hooks.log in the state folder; '-' for stderr)."
)
@pass_state
def hook_cmd(
    state: State,
    host: str,
    session_key: str | None,
    agent_id: str | None,
    no_nudge: bool,
    nudge_wait: int,
    foreground_nudge: bool,
    log_file: str | None,
) -> None:
    """Run as a Claude Code or Codex CLI hook: read the hook's JSON on stdin, answer on stdout.

    On SessionStart, UserPromptSubmit and PostToolUse it adds the session's pending
    notices (the 'System: ...' lines) to the model's context, at least once; in an
    adopted (watched) thread, UserPromptSubmit also nudges the monitor so a person's
    prompt is recorded within seconds. It always exits 0 and answers at once: a store
    or gateway that is down means nothing to add (the reason goes to the log).

    The answer is always the host's own JSON (--json changes nothing). The host
    runs it; see docs/hooks-claude-code.md and docs/hooks-codex.md.

    \b
    Examples:
      sessionwatch hook claude-code --session agent:main:main
      sessionwatch --gateway http://127.0.0.1:7878 hook codex
    """
    from ..hooks.run import main, setup_logging

    ctx = click.get_current_context()
    level = ctx.find_root().params.get("log_level") or "warning"
    setup_logging(log_file, "info" if level == "warning" else level)
    main(
        host,
        session=session_key,
        agent=agent_id,
        store=state.store,
        gateway=state.gateway,
        token=state.token,
        nudge=not no_nudge,
        nudge_retry_ms=nudge_wait,
        foreground_nudge=foreground_nudge,
    )


def _show(changes: list, verb: str, host: str) -> Any:
    def human(c: Any) -> None:
        for ch in changes:
            line = f"{ch.action:9} {ch.path}"
            if ch.what:
                line += ": " + ", ".join(ch.what)
            if ch.backup:
                line += f" (previous file kept as {ch.backup})"
            c.print(line, markup=False)
            if ch.note:
                c.print(f"          {ch.note}", markup=False)
        if verb == "install" and host == "codex":
            c.print(
                "Codex runs a new hook once you trust it: open /hooks in Codex. See docs/hooks-codex.md.", markup=False
            )
        if all(ch.action in ("unchanged", "skipped") for ch in changes):
            c.print("Nothing changed.", markup=False)

    return human


SCOPE_USER = click.option("--user", "user", flag_value=True, help="The user's own config (all projects).")
SCOPE_PROJECT = click.option(
    "--project", "user", flag_value=False, default=False, help="The project's config in --dir (default)."
)
DIR = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    metavar="PATH",
    help="Project folder for --project (default: the current folder).",
)


@command(cli, "install")
@HOST
@SCOPE_PROJECT
@SCOPE_USER
@DIR
@click.option(
    "--session",
    "session_key",
    metavar="KEY",
    help="The session the host stands for: written into the hook and the MCP server (which needs it).",
)
@click.option("--agent", "agent_id", metavar="AGENT_ID", help="Agent of the session (only for bare 'global').")
@pass_state
def install_cmd(
    state: State, host: str, user: bool, directory: str | None, session_key: str | None, agent_id: str | None
) -> None:
    """Write sessionwatch's hooks and MCP server into Claude Code's or Codex's config.

    Merges with what is there (other hooks and servers are kept), keeps the previous
    file as <file>.sessionwatch-backup, and is idempotent. The global --store or
    --gateway given here are written into the commands too (a token never is: the
    host passes SESSIONWATCH_TOKEN from its environment).

    \b
    Examples:
      sessionwatch install claude-code --session agent:main:main
      sessionwatch install claude-code --user
      sessionwatch --gateway http://127.0.0.1:7878 install codex --project --session agent:main:main
    """
    from ..hooks.install import install
    from .output import emit  # rich: only here, never on the hook's path

    global_args: list[str] = []
    if state.gateway:
        global_args += ["--gateway", state.gateway]
    elif state.store:
        global_args += ["--store", state.store]
    changes = install(
        host, user=user, directory=directory, session=session_key, agent=agent_id, global_args=global_args
    )
    emit(state.json, {"host": host, "changes": [c.to_json() for c in changes]}, _show(changes, "install", host))


@command(cli, "uninstall")
@HOST
@SCOPE_PROJECT
@SCOPE_USER
@DIR
@pass_state
def uninstall_cmd(state: State, host: str, user: bool, directory: str | None) -> None:
    """Remove exactly what 'install' wrote (sessionwatch's hooks and MCP server).

    \b
    Examples:
      sessionwatch uninstall claude-code
      sessionwatch uninstall codex --user
    """
    from ..hooks.install import uninstall
    from .output import emit

    changes = uninstall(host, user=user, directory=directory)
    emit(state.json, {"host": host, "changes": [c.to_json() for c in changes]}, _show(changes, "uninstall", host))
