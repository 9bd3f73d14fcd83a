"""Host integration commands: hook (run by Claude Code / Codex CLI), install and uninstall."""

from __future__ import annotations

import click

from .app import State, cli, command, pass_state

HOST = click.argument("host", metavar="HOST", type=click.Choice(["claude-code", "codex"]))


@cli.command("hook", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@HOST
@click.option("--session", "session_key", metavar="KEY",
              help="The sessionwatch session this host session stands for. Env: SESSIONWATCH_SESSION. "
                   "Default: the session whose adoption link is this thread.")
@click.option("--agent", "agent_id", metavar="AGENT_ID", help="Agent of the session (only for bare 'global').")
@click.option("--no-nudge", is_flag=True, help="Do not nudge the upstream monitor on UserPromptSubmit.")
@click.option("--nudge-wait", type=click.IntRange(0, 10_000), default=2000, show_default=True, metavar="MS",
              help="How long the nudge keeps looking for the prompt's transcript row.")
@click.option("--foreground-nudge", is_flag=True,
              help="Nudge before exiting instead of in a detached child (slower answer).")
@click.option("--log-file", metavar="PATH", help="Where the hook logs (default: hooks.log in the state folder; "
                                                  "'-' for stderr).")
@pass_state
def hook_cmd(state: State, host: str, session_key: str | None, agent_id: str | None, no_nudge: bool,
             nudge_wait: int, foreground_nudge: bool, log_file: str | None) -> None:
    """Run as a Claude Code or Codex CLI hook: read the hook's JSON on stdin, answer on stdout.

    On SessionStart, UserPromptSubmit and PostToolUse it adds the session's pending
    notices (the 'System: ...' lines) to the model's context, at least once; in an
    adopted (watched) thread, UserPromptSubmit also nudges the monitor so a person's
    prompt is recorded within seconds. It always exits 0 and answers at once: a store
    or gateway that is down means nothing to add (the reason goes to the log).

    \b
    Examples (the host runs these; see docs/hooks-claude-code.md, docs/hooks-codex.md):
      sessionwatch hook claude-code --session agent:main:main
      sessionwatch --gateway http://127.0.0.1:7878 hook codex
    """
    from ..hooks.run import main, setup_logging

    ctx = click.get_current_context()
    level = ctx.find_root().params.get("log_level") or "warning"
    setup_logging(log_file, "info" if level == "warning" else level)
    main(host, session=session_key, agent=agent_id, store=state.store, gateway=state.gateway, token=state.token,
         nudge=not no_nudge, nudge_retry_ms=nudge_wait, foreground_nudge=foreground_nudge)
