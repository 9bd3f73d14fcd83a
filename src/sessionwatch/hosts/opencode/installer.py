"""``install``/``uninstall``/``doctor opencode`` and ``--verify``: the room's files (the plugin and its config
entries, ``install.py``) with the checks the other hosts get (``hosts/checks.py``).

The plugin runs ``sessionwatch [--store|--gateway ...] hook opencode [--session KEY] [--agent ID]``; a check
fires a sample ``UserPromptSubmit`` through exactly that command line (with a throwaway state folder, so
it takes no notice meant for a session), and says whether the store or gateway answers. The MCP server
(the same command line with ``mcp``) is started as OpenCode starts it and must list its tools, and the
config's permission rules must let OpenCode call them without asking.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument
from ...keys import parse_key
from ..agent_names import agent_from_folder
from ..base import USER_PROMPT_SUBMIT
from ..checks import (
    Check,
    Diagnosis,
    HookRun,
    McpProbe,
    ScopeReport,
    host_version as program_version,
    probe_mcp,
    run_hook,
)
from ..installer import Change, Installation, refuse_machine_paths, sample_payload, sessionwatch_argv
from . import install as room
from .room import PROGRAM

HOST = "opencode"


def _hook_args(session: str | None, agent: str | None) -> list[str]:
    out: list[str] = []
    if session:
        out += ["--session", session]
    if agent:
        out += ["--agent", agent]
    return out


def check_options(lay: room.Layout, session: str | None, global_args: list[str]) -> None:
    if session is not None:
        parse_key(session, "--session")
    if lay.scope == "user" and session is not None:
        raise InvalidArgument(
            "--user installs for every OpenCode session on this machine, so --session would bind them all to "
            "one key: bind a project with --project --session KEY; for --user each session gets its own key "
            "(agent:<folder>:opencode:<session id>)"
        )
    if lay.scope == "project":
        refuse_machine_paths(global_args)


def install(
    scope: str, directory: str | None, session: str | None, agent: str | None, global_args: list[str]
) -> tuple[room.Layout, list[room.Change]]:
    lay = room.layout(scope, directory)
    check_options(lay, session, global_args)
    if agent is None and session is None and scope == "project":
        agent = agent_from_folder(str(lay.dir))  # the project's agent, fixed now (as for the other hosts)
    command = ["sessionwatch"] if scope == "project" else sessionwatch_argv()
    return lay, room.install(lay, command, list(global_args), _hook_args(session, agent))


def uninstall(scope: str, directory: str | None) -> list[room.Change]:
    return room.uninstall(room.layout(scope, directory))


def hook_command(lay: room.Layout) -> tuple[str | None, dict[str, Any] | None]:
    """The command line the installed plugin runs (None when no plugin of ours is there), and its settings."""
    try:
        settings = room.settings_of(lay.plugin_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None, None
    if settings is None:
        return None, None
    argv = [*settings.get("command", []), *settings.get("globalArgs", []), "hook", HOST, *settings.get("hookArgs", [])]
    return shlex.join(str(a) for a in argv), settings


def verify(lay: room.Layout) -> HookRun | None:
    command, _ = hook_command(lay)
    return _run(command, lay) if command is not None else None


def probe_server(lay: room.Layout, server: dict[str, Any]) -> McpProbe:
    """Start our MCP server as OpenCode starts it (in the project folder, with OpenCode's environment and
    the entry's own) and list its tools."""
    argv = [str(a) for a in server["command"]]
    env = {**os.environ, **{str(k): str(v) for k, v in (server.get("environment") or {}).items()}}
    return probe_mcp({"command": argv[0], "args": argv[1:]}, lay.dir, env)


def _wildcard(value: str, pattern: str) -> bool:
    """OpenCode's match of a permission name against a rule's (``*`` any run, ``?`` one character)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.S) is not None


def tool_permission(lay: room.Layout) -> tuple[str, str]:
    """What OpenCode does when the model calls one of our tools, from the config files it reads (the
    user's, then the project's; the last matching rule wins): (action, where it is said). ``allow`` when no
    rule matches (OpenCode's default for a server's tools)."""
    files = [room.config_home() / "opencode.json"]
    if lay.scope == "project":
        files.append(lay.dir / "opencode.json")
    action, where = "allow", "no rule (OpenCode's default)"
    tool = f"{room.SERVER_NAME}_session_status"
    for path in files:
        try:
            data, _ = room._read_config(path)
        except Exception:  # noqa: BLE001 - a broken file is the config check's to report
            continue
        for name, pattern, rule in room.permission_rules(data):
            if _wildcard(tool, name) and _wildcard("*", pattern):
                action, where = rule, f"{path}: permission {name!r}: {rule!r}"
    return action, where


def _run(command: str, lay: room.Layout) -> HookRun:
    return run_hook(command, lay.dir, sample_payload(USER_PROMPT_SUBMIT, lay.dir))


def fix_command(lay: room.Layout, settings: dict[str, Any] | None = None) -> str:
    argv = ["sessionwatch", "install", HOST, f"--{lay.scope}"]
    if lay.scope == "project":
        argv += ["--dir", str(lay.dir)]
    return shlex.join(argv)


def diagnose(scope: str, directory: str | None, *, probe: bool = True) -> Diagnosis:
    lay = room.layout(scope, directory)
    command, settings = hook_command(lay)
    listed = room.found_entry(lay)
    installed = command is not None or listed or room.found_server(lay) is not None
    report = ScopeReport(HOST, scope, None if scope == "user" else str(lay.dir), installed)
    if not report.installed:
        return Diagnosis(report)
    checks = report.checks
    fix = fix_command(lay)
    if command is None or settings is None:
        checks.append(Check("plugin", False, f"{lay.plugin_path} is missing or not sessionwatch's", fix))
    else:
        hook_args = list(settings.get("hookArgs", []))
        fresh = room.plugin_source(list(settings.get("command", [])), list(settings.get("globalArgs", [])), hook_args)
        current = lay.plugin_path.read_text(encoding="utf-8") == fresh
        detail = f"{lay.plugin_path}" + ("" if current else " (an older version: reinstall to update it)")
        checks.append(Check("plugin", True if current else None, detail, None if current else fix))
    if listed:
        checks.append(Check("config", True, f"{lay.entry} in the 'plugin' list of {lay.config_path}"))
    else:
        checks.append(Check("config", False, f"{lay.config_path} does not list {lay.entry}", fix))
    checks += _check_tools(lay, probe)
    if command is None:
        return Diagnosis(report)
    checks.append(_check_command(command, lay, probe))
    global_args = list(settings.get("globalArgs", [])) if settings else []
    session = _option(settings, "--session")
    return Diagnosis(report, (global_args, session, _option(settings, "--agent") if session else None))


def _check_tools(lay: room.Layout, probe: bool) -> list[Check]:
    """The MCP server that gives the model the tools: registered, starting and listing them as OpenCode
    starts it, and the tools permitted without asking."""
    fix = fix_command(lay)
    server = room.found_server(lay)
    if server is None:
        detail = f"{lay.config_path} registers no sessionwatch MCP server: the model has no sessionwatch tools"
        return [Check("mcp", False, detail, fix)]
    out: list[Check] = []
    if server.get("enabled") is False:
        out.append(Check("mcp", False, f"the sessionwatch MCP server is disabled in {lay.config_path}", fix))
    elif not probe:
        out.append(Check("mcp", True, f"registered in {lay.config_path}"))
    else:
        p = probe_server(lay, server)
        if p.ok:
            out.append(Check("mcp", True, f"{server['command'][0]} mcp starts as OpenCode starts it: {p.detail}"))
        else:
            out.append(Check("mcp", False, f"the MCP server does not start: {p.detail}", fix + " --verify"))
    action, where = tool_permission(lay)
    if action == "allow":
        out.append(Check("permitted", True, f"OpenCode calls the {room.PERMISSION} tools without asking ({where})"))
    else:
        said = "refuses every call" if action == "deny" else "asks before each call (opencode run refuses it)"
        out.append(
            Check(
                "permitted", False, f"OpenCode {said}: {where}", f'set "permission": {{"{room.PERMISSION}": "allow"}}'
            )
        )
    return out


def _option(settings: dict[str, Any] | None, name: str) -> str | None:
    args = list(settings.get("hookArgs", [])) if settings else []
    return str(args[args.index(name) + 1]) if name in args[:-1] else None


def _check_command(command: str, lay: room.Layout, probe: bool) -> Check:
    exe = shlex.split(command)[0]
    found = exe if "/" in exe else shutil.which(exe)
    if found is None or not Path(found).exists():
        return Check(
            "command",
            False,
            f"{exe} is not found on PATH: the plugin runs nothing (OpenCode works on, without notices)",
            "install sessionwatch where OpenCode's PATH finds it, or: sessionwatch install opencode --user",
        )
    if not probe:
        return Check("command", True, found)
    run = _run(command, lay)
    if run.error is not None:
        return Check("command", False, f"a sample UserPromptSubmit fails: {run.error}", fix_command(lay) + " --verify")
    said = "adds a notice" if run.context else "adds nothing (no notice pending)"
    return Check("command", True, f"{found}: a sample UserPromptSubmit answers in {run.ms:.0f} ms, exit 0, {said}")


@dataclass
class PluginVerification:
    """``install opencode --verify``: a sample UserPromptSubmit through the plugin's command line, and the
    MCP server started as OpenCode starts it."""

    command: str | None
    run: HookRun
    mcp: McpProbe | None = None

    @property
    def ok(self) -> bool:
        return self.run.error is None and (self.mcp is None or self.mcp.ok)

    def to_json(self) -> dict[str, Any]:
        run = self.run
        out: dict[str, Any] = {
            "ok": self.ok,
            "command": self.command,
            "hook": {
                "event": USER_PROMPT_SUBMIT,
                "exitCode": run.returncode,
                "ms": round(run.ms, 1),
                "additionalContext": run.context,
                "error": run.error,
                "log": run.log,
            },
        }
        if self.mcp is not None:
            m = self.mcp
            out["mcp"] = {"ok": m.ok, "detail": m.detail, "tools": m.tools, "ms": round(m.ms, 1)}
        return out

    def lines(self) -> list[str]:
        run = self.run
        state = f"exit {run.returncode}" if run.returncode is not None else "no exit"
        out = [f"verify    UserPromptSubmit through the plugin's command: {state} in {run.ms:.0f} ms"]
        if run.error:
            out.append(f"          OpenCode would get nothing: {run.error}")
        elif run.context:
            out.append("          the model would read:")
            out += [f"            {line}" for line in run.context.splitlines()]
        else:
            out.append("          the model would read nothing: no notice is pending for this session")
        if self.mcp is not None:
            m = self.mcp
            tools = f" ({', '.join(m.tools)})" if m.tools else ""
            out.append(f"verify    MCP server: {'ok' if m.ok else 'FAILED'}: {m.detail}{tools}")
        return out


class OpenCodeInstaller:
    """The room's ``installer.Installer``: the plugin and its config entry."""

    path_hint = "`sessionwatch` is not on this PATH: the plugin finds the command through OpenCode's PATH"
    quiet_version = True  # ``opencode --version`` starts its runtime: asked only when the room is in use

    def install(
        self,
        scope: str,
        directory: str | None,
        session: str | None,
        agent: str | None,
        global_args: list[str],
        *,
        trust: bool = True,
    ) -> Installation:
        lay, changes = install(scope, directory, session, agent, global_args)

        def check() -> PluginVerification | None:
            run = verify(lay)
            if run is None:
                return None
            server = room.found_server(lay)
            return PluginVerification(hook_command(lay)[0], run, probe_server(lay, server) if server else None)

        return Installation(list(changes), check)

    def uninstall(self, scope: str, directory: str | None) -> list[Change]:
        return uninstall(scope, directory)

    def diagnose(self, scope: str, directory: str | None, *, probe: bool = True) -> Diagnosis:
        return diagnose(scope, directory, probe=probe)

    def version(self) -> str | None:
        return program_version(PROGRAM)


INSTALLER = OpenCodeInstaller()
