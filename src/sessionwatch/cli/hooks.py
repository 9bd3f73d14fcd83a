"""Host integration commands: hook (run by Claude Code / Codex CLI), install, uninstall and doctor."""

from __future__ import annotations

import shutil
from typing import Any

import click

from ..hosts.registry import NAMES, room
from .app import State, cli, command, pass_state

HOSTS = list(NAMES)  # every room in the registry (hosts/registry.py)
HOST = click.argument("host", metavar="HOST", type=click.Choice(HOSTS))


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
    default=10_000,
    show_default=True,
    metavar="MS",
    help="How long the nudge keeps looking for the prompt's transcript row (the host writes it after the hook).",
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
    """Run as a Claude Code or Codex CLI hook (or from Pi's extension): JSON on stdin, the answer on stdout.

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


def _show(changes: list[Any], verb: str, verification: Any = None, warnings: list[str] | None = None) -> Any:
    def human(c: Any) -> None:
        for ch in changes:
            line = f"{ch.action:9} {ch.path}"
            if ch.what:
                line += ": " + ", ".join(ch.what)
            c.print(line, markup=False)
            if ch.note:
                c.print(f"          {ch.note}", markup=False)
        for w in warnings or []:
            c.print(f"warning   {w}", markup=False)
        if all(ch.action in ("unchanged", "skipped") for ch in changes):
            c.print("Nothing changed.", markup=False)
        if verification is not None:
            for line in verification.lines():
                c.print(line, markup=False)

    return human


def _scope_option(fn: Any) -> Any:
    for name, help_text in reversed(
        (
            ("project", "The project's shared files in --dir, meant to be committed (default)."),
            ("local", "This person's files for the project in --dir (Claude Code only; not committed)."),
            ("user", "The user's own config (every project)."),
        )
    ):
        kw: dict[str, Any] = {"default": True} if name == "project" else {}
        fn = click.option(f"--{name}", "scope", flag_value=name, help=help_text, **kw)(fn)
    return fn


DIR = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    metavar="PATH",
    help="Project folder for --project and --local (default: the current folder).",
)


def _global_args(state: State, scope: str) -> list[str]:
    """The global options written into the installed commands. A project install's files are committed:
    a store taken from ``SESSIONWATCH_STORE`` stays there (the hooks read the variable when they run), as
    the refusal of a machine path written into them advises."""
    if state.gateway:
        return ["--gateway", state.gateway]
    if state.store and not (scope == "project" and state.store_from_env):
        return ["--store", state.store]
    return []


@command(cli, "install")
@HOST
@_scope_option
@DIR
@click.option(
    "--session",
    "session_key",
    metavar="KEY",
    help="One session the host stands for, written into the hook and the MCP server. Default: each host "
    "session gets its own, agent:AGENT:claude:<session id> or agent:AGENT:codex:<session id>.",
)
@click.option(
    "--agent",
    "agent_id",
    metavar="AGENT_ID",
    help="The agent of the host sessions' own keys (default: the project folder's name; --user: the folder "
    "each session runs in). With --session, only for a bare 'global' key.",
)
@click.option("--no-trust", is_flag=True, help="Codex: leave trusting the hooks to the person (prints the step).")
@click.option(
    "--verify", is_flag=True, help="Then fire a sample payload through the installed hook and start the MCP server."
)
@pass_state
def install_cmd(
    state: State,
    host: str,
    scope: str,
    directory: str | None,
    session_key: str | None,
    agent_id: str | None,
    no_trust: bool,
    verify: bool,
) -> None:
    """Install sessionwatch into a host (Claude Code, Codex, OpenCode, Pi), usable at once.

    Claude Code: the hooks, the MCP server with its tools loaded up front
    (alwaysLoad), the permission rule that lets the model call them, and (--project)
    the approval of the project's server. Codex: the hooks, the MCP server (Codex
    waits for it and passes SESSIONWATCH_TOKEN), and the hooks' trust, written by
    Codex itself through `codex app-server` when codex is on PATH (--no-trust: left
    to you). Pi: the extension (.pi/extensions/sessionwatch.ts, or the agent dir's
    extensions/ with --user) that runs `sessionwatch hook pi`. OpenCode: the plugin
    (.sessionwatch/opencode-plugin.js, listed in opencode.json) that runs
    `sessionwatch hook opencode`. Merges with what is there and is idempotent; what
    each file held before is kept in the state folder, so uninstall restores it
    exactly.

    --project files are meant to be committed and hold no path of this machine (the
    command is `sessionwatch` from PATH); --local and --user files name this
    installation's absolute path. The global --store or --gateway given here are
    written into the commands too (a token never is: the host passes
    SESSIONWATCH_TOKEN from its environment; nor, for --project, a store taken
    from SESSIONWATCH_STORE: the hooks read the variable when they run).

    \b
    Examples:
      sessionwatch install claude-code --session agent:main:main
      sessionwatch install claude-code --local --session agent:main:main --verify
      sessionwatch install codex --session agent:main:main
      sessionwatch install pi --verify
      sessionwatch --gateway http://127.0.0.1:7878 install codex --user
    """
    from ..hooks.doctor import check_backend
    from .output import emit  # rich: only here, never on the hook's path

    installer = room(host).installer()
    global_args = _global_args(state, scope)
    done = installer.install(scope, directory, session_key, agent_id, global_args, trust=not no_trust)
    changes = done.changes
    warnings: list[str] = []
    if session_key is None and not state.gateway:
        # each host session creates its own session on its first event, and a hook never creates a
        # store: make sure the store is there
        from .backend import Backend

        Backend.open(store=state.store).close()
    if session_key is not None:
        found = check_backend(global_args, session_key, agent_id)
        if found.ok is not True:
            warnings.append(found.detail)
    if scope == "project" and shutil.which("sessionwatch") is None:
        warnings.append(installer.path_hint)
    verification = done.verify() if verify else None
    data: dict[str, Any] = {
        "host": host,
        "scope": scope,
        "changes": [c.to_json() for c in changes],
        "warnings": warnings,
    }
    if verification is not None:
        data["verify"] = verification.to_json()
    emit(state.json, data, _show(changes, "install", verification, warnings))
    failed = any(c.action == "failed" for c in changes) or (verification is not None and not verification.ok)
    if failed:
        raise click.exceptions.Exit(1)


@command(cli, "uninstall")
@HOST
@_scope_option
@DIR
@pass_state
def uninstall_cmd(state: State, host: str, scope: str, directory: str | None) -> None:
    """Remove exactly what 'install' wrote, and give each file back as it was.

    A file still exactly as install left it gets its old bytes back (or is removed,
    with the folders install created for it); a file changed since loses only
    sessionwatch's entries (and the Codex trust entries install had Codex write).

    \b
    Examples:
      sessionwatch uninstall claude-code
      sessionwatch uninstall claude-code --local
      sessionwatch uninstall codex --user
    """
    from .output import emit

    changes = room(host).installer().uninstall(scope, directory)
    emit(
        state.json,
        {"host": host, "scope": scope, "changes": [c.to_json() for c in changes]},
        _show(changes, "uninstall"),
    )


@command(cli, "doctor")
@click.argument("host", metavar="[HOST]", required=False, type=click.Choice(HOSTS))
@DIR
@pass_state
def doctor_cmd(state: State, host: str | None, directory: str | None) -> None:
    """Is sessionwatch usable in Claude Code and Codex here? Per host and scope.

    Checks that the hooks are there and answer a sample payload, that Codex
    trusts them, that the MCP server starts and lists its tools in the host's
    environment, that the host may call them (Claude Code's permission rule and
    project-server approval; Codex waits for the server and passes the token),
    that the store or gateway answers, and the host's version. Each failure names
    the command that fixes it. Exit 1 when something is broken (or nothing is
    installed); --json for scripts.

    \b
    Examples:
      sessionwatch doctor
      sessionwatch doctor codex --dir ~/src/acme --json
    """
    from ..hooks.doctor import diagnose
    from .output import emit

    hosts = [host] if host else list(HOSTS)
    reports: list[dict[str, Any]] = []
    broken = False
    installed = False
    for name in hosts:
        r = room(name)
        installer = r.installer()
        scopes = [diagnose(r, scope, directory) for scope in r.scopes]
        asked = not installer.quiet_version or any(s.installed for s in scopes) or host is not None
        version = installer.version() if asked else None
        installed |= any(s.installed for s in scopes)
        broken |= not all(s.ok for s in scopes)
        reports.append({"host": name, "version": version, "scopes": [s.to_json() for s in scopes]})
    ok = installed and not broken

    def human(c: Any) -> None:
        for r in reports:
            c.print(f"{r['host']}  ({r['version'] or 'not on PATH'})", markup=False)
            for s in r["scopes"]:
                label = s["scope"] + (f" {s['dir']}" if s["dir"] else "")
                if not s["installed"]:
                    c.print(f"  {label}: not installed", markup=False)
                    continue
                c.print(f"  {label}: {'ok' if s['ok'] else 'BROKEN'}", markup=False)
                for ch in s["checks"]:
                    mark = {True: "ok  ", False: "FAIL", None: "warn"}[ch["ok"]]
                    c.print(f"    {mark} {ch['check']:10} {ch['detail']}", markup=False)
                    if ch["fix"] and ch["ok"] is not True:
                        c.print(f"         {'':10} fix: {ch['fix']}", markup=False)
        if not installed:
            c.print(f"sessionwatch is not installed here: sessionwatch install {'|'.join(HOSTS)}", markup=False)

    emit(state.json, {"ok": ok, "installed": installed, "hosts": reports}, human)
    if not ok:
        raise click.exceptions.Exit(1)
