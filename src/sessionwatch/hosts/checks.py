"""``sessionwatch doctor`` and ``install --verify`` for a room configured through files: is what install wrote
usable, as the host will use it?

Per scope: our hooks are there and their command runs (a sample payload through it, as the host would send
it), the MCP server starts and lists its tools in the environment the host gives it, and what the room adds
(``Target.command_checks``, ``Target.server_checks``: Codex's trust, Claude Code's permission rule). Every
failure comes with the command that fixes it. Nothing here changes a config file; a sample payload runs with
a throwaway state folder, so it can neither take nor acknowledge a notice meant for the host. Whether the
store or gateway answers is the face's check (``hooks/doctor.py``): a :class:`Diagnosis` says what to ask.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..errors import InvalidArgument
from .base import USER_PROMPT_SUBMIT
from .install_api import Check as Check, Diagnosis as Diagnosis, Found as Found, ScopeReport as ScopeReport
from .installer import (
    HOOK_TIMEOUT_S,
    Change,
    Installation,
    JsonFormat,
    Target,
    TomlFormat,
    check_options,
    fix_command,
    is_our_hook,
    is_our_http_hook,
    is_our_server,
    make_target,
)
from .jsonrpc import LineClient, RpcError

MCP_TIMEOUT_S = 30.0  # Claude Code's and Codex's own connect timeouts are of this order


# -- what install left -------------------------------------------------------------------------------------
@dataclass
class Command:
    """A hook or server command line of ours, taken apart."""

    argv0: list[str]
    global_args: list[str]
    session: str | None
    agent: str | None

    def option(self, name: str) -> str | None:
        for flag, value in zip(self.global_args, self.global_args[1:], strict=False):
            if flag == name:
                return value
        return None


def parse_command(tokens: list[str], verb: str) -> Command:
    start = 1
    for i, tok in enumerate(tokens):
        if os.path.basename(tok) == "sessionwatch":
            start = i + 1
            break
    at = tokens.index(verb) if verb in tokens else len(tokens)
    rest = tokens[at:]

    def after(name: str) -> str | None:
        return rest[rest.index(name) + 1] if name in rest[:-1] else None

    return Command(tokens[:start], tokens[start:at], after("--session"), after("--agent"))


def read_config(path: Path, fmt: type[JsonFormat] | type[TomlFormat]) -> tuple[Any, Check | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, Check("files", False, f"cannot read {path}: {exc}")
    try:
        return fmt.parse(path, raw), None
    except Exception as exc:  # noqa: BLE001 - InvalidArgument: the host cannot read it either
        return None, Check("files", False, str(exc), f"fix or remove {path}")


def find(t: Target) -> Found:
    """Our hook handlers in the host's hooks file (a room with its own kind of file reads it itself,
    ``Target.find``), and our MCP server."""
    own = t.find()
    if own is not None:
        return own
    problems: list[Check] = []
    hooks: dict[str, str] = {}
    http: dict[str, str] = {}
    data, problem = read_config(t.hooks_path, JsonFormat)
    if problem:
        problems.append(problem)
    groups_by_event = data.get("hooks") if isinstance(data, dict) else None
    if isinstance(groups_by_event, dict):
        for event, groups in groups_by_event.items():
            for group in groups if isinstance(groups, list) else []:
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for h in handlers if isinstance(handlers, list) else []:
                    if isinstance(h, dict) and is_our_hook(h.get("command"), t.host):
                        hooks.setdefault(event, h["command"])
                    elif is_our_http_hook(h, t.host):
                        http.setdefault(event, h["url"])
    server: dict[str, Any] | None = None
    entry, problem = t.read_server()
    if problem:
        problems.append(problem)
    if is_our_server(entry):
        server = dict(entry)
    return Found(hooks, server, problems, http)


def installed_target(t: Target, found: Found) -> Target:
    """The target as installed (its session, agent and global options), for the fix commands."""
    command = next(iter(found.hooks.values()), None)
    if command is not None:
        c = parse_command(shlex.split(command), "hook")
    elif found.server is not None:
        c = parse_command([found.server["command"], *found.server.get("args", [])], "mcp")
    else:
        return t
    session = c.session
    if session is None and found.server is not None:
        session = parse_command([found.server["command"], *found.server.get("args", [])], "mcp").session
    return t.like(session=session, agent=c.agent, global_args=c.global_args)


@dataclass
class HookRun:
    returncode: int | None
    stdout: str
    stderr: str
    ms: float
    context: str | None  # what the model would read; None: nothing
    error: str | None  # why the host would not take the answer
    log: list[str]


def run_hook(command: str, cwd: Path, sample: dict[str, Any], env_extra: dict[str, str] | None = None) -> HookRun:
    """Fire ``sample`` (what the host sends, see ``installer.sample_payload``) through ``command`` through a
    shell, in ``cwd``, as the host would (``env_extra``: what the host adds to its environment)."""
    payload = json.dumps(sample)
    tmp = tempfile.mkdtemp(prefix="sessionwatch-verify-")
    try:
        return _run_hook(command, cwd, payload, tmp, env_extra)
    finally:
        _remove_when_written(tmp)


def _remove_when_written(folder: str, within_s: float = 5.0) -> None:
    """Remove the run's state folder; the hook's detached writer may still be writing its log and order
    file there after the host's answer, so a folder that refills is tried again (then left, quietly)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            shutil.rmtree(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                shutil.rmtree(folder, ignore_errors=True)
                return
            time.sleep(0.1)


def _run_hook(command: str, cwd: Path, payload: str, tmp: str, env_extra: dict[str, str] | None) -> HookRun:
    env = {**os.environ, **(env_extra or {}), "SESSIONWATCH_STATE_DIR": tmp}
    started = time.monotonic()
    try:
        out = subprocess.run(
            ["/bin/sh", "-c", command],
            input=payload,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=HOOK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        ms = (time.monotonic() - started) * 1000
        return HookRun(None, "", "", ms, None, f"no answer within the host's {HOOK_TIMEOUT_S} s", [])
    ms = (time.monotonic() - started) * 1000
    try:
        log = (Path(tmp) / "hooks.log").read_text(encoding="utf-8").splitlines()
    except OSError:
        log = []
    context, error = None, None
    if out.returncode != 0:
        error = f"exit {out.returncode}: the host shows a hook error" + (
            " and erases the prompt" if out.returncode == 2 else ""
        )
    elif out.stdout.strip():
        try:
            context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        except (ValueError, KeyError, TypeError):
            error = "its output is not the host's hook JSON"
    return HookRun(out.returncode, out.stdout, out.stderr, ms, context, error, log)


@dataclass
class McpProbe:
    ok: bool
    detail: str
    tools: list[str]
    ms: float


def probe_mcp(server: dict[str, Any], cwd: Path, env: dict[str, str], timeout: float = MCP_TIMEOUT_S) -> McpProbe:
    """Start the server as the host would (``env``: the environment the host gives its servers) and list its
    tools (MCP ``initialize`` + ``tools/list``)."""
    command = str(server["command"])
    exe = command if os.sep in command else shutil.which(command, path=env.get("PATH"))
    if exe is None or not os.access(exe, os.X_OK):
        return McpProbe(False, f"{command} is not found on the host's PATH", [], 0.0)
    args = [str(a) for a in server.get("args") or []]
    started = time.monotonic()
    client: LineClient | None = None
    try:
        client = LineClient([exe, *args], cwd=cwd, env=env, timeout=timeout, jsonrpc=True, name="the MCP server")
        client.call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "sessionwatch-doctor", "version": "1"},
            },
        )
        client.notify("notifications/initialized")
        listed = client.call("tools/list", {})
        ms = (time.monotonic() - started) * 1000
    except RpcError as exc:
        return McpProbe(False, str(exc), [], (time.monotonic() - started) * 1000)
    finally:
        if client is not None:
            client.close()
    tools = sorted(str(x.get("name")) for x in (listed or {}).get("tools") or [] if isinstance(x, dict))
    return McpProbe(bool(tools), f"{len(tools)} tools listed {ms:.0f} ms after start", tools, ms)


def host_version(program: str) -> str | None:
    """The first line of ``program --version`` (None: not on PATH, or no answer)."""
    binary = shutil.which(program)
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else None


def diagnose(base: Target, *, probe: bool = True) -> Diagnosis:
    found = find(base)
    t = installed_target(base, found)
    report = ScopeReport(
        t.host, t.scope, None if t.scope == "user" else str(t.dir), bool(found.hooks or found.server or found.http)
    )
    report.checks += found.problems
    if not report.installed:
        return Diagnosis(report)
    fix = fix_command(t)
    checks = report.checks
    events = t.events()
    missing = [e for e in events if e not in found.hooks and e not in found.http]
    if missing:
        checks.append(Check("hooks", False, f"missing in {t.hooks_path}: {', '.join(missing)}", fix))
    else:
        checks.append(Check("hooks", True, f"{', '.join(events)} in {t.hooks_path}"))
    command = next(iter(found.hooks.values()), None)
    if command is not None:
        checks.append(check_command(t, command, probe))
        checks += t.command_checks(found)
    if t.has_mcp:
        checks += check_mcp(t, found, probe)
    return Diagnosis(report, (t.global_args, t.session, t.agent))


def check_command(t: Target, command: str, probe: bool) -> Check:
    tokens = shlex.split(command)
    exe = tokens[0] if os.sep in tokens[0] else shutil.which(tokens[0])
    if exe is None or not os.access(exe, os.X_OK):
        how = "install sessionwatch where the host's PATH finds it" + (
            "" if t.scope != "project" else f", or use this person's files: {fix_command(t.like(scope='local'))}"
        )
        return Check("command", False, f"{tokens[0]} is not found on PATH", how)
    if not probe:
        return Check("command", True, f"{exe}")
    run = run_hook(command, t.dir, t.sample_payload(USER_PROMPT_SUBMIT), t.hook_env())
    if run.error is not None:
        reason = run.error + (f" ({run.stderr.strip().splitlines()[-1]})" if run.stderr.strip() else "")
        return Check("command", False, f"the UserPromptSubmit hook fails: {reason}", f"{fix_command(t)} --verify")
    said = "adds a notice" if run.context else "adds nothing (no notice pending)"
    return Check("command", True, f"{exe}: a sample UserPromptSubmit answers in {run.ms:.0f} ms, exit 0, {said}")


def check_mcp(t: Target, found: Found, probe: bool) -> list[Check]:
    server = found.server
    if server is None:
        hint = "give --session KEY" + (" with --project or --local" if t.scope == "user" else "")
        return [
            Check(
                "mcp",
                None,
                f"no sessionwatch MCP server in {t.mcp_path}: the tools are not available",
                f"install again and {hint}",
            )
        ]
    out: list[Check] = t.server_checks(server)
    if probe:
        p = probe_mcp(server, t.dir, t.mcp_env(server))
        if p.ok:
            out.append(Check("mcp", True, f"{server['command']} starts: {p.detail}"))
        else:
            out.append(Check("mcp", False, f"the server does not start: {p.detail}", f"{fix_command(t)} --verify"))
    elif not out:
        out.append(Check("mcp", True, f"registered in {t.mcp_path}"))
    return out


@dataclass
class Verification:
    hook_command: str | None
    hook: HookRun | None
    mcp: McpProbe | None

    @property
    def ok(self) -> bool:
        hook_ok = self.hook is not None and self.hook.error is None
        return hook_ok and (self.mcp is None or self.mcp.ok)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "command": self.hook_command}
        if self.hook is not None:
            h = self.hook
            out["hook"] = {
                "event": USER_PROMPT_SUBMIT,
                "exitCode": h.returncode,
                "ms": round(h.ms, 1),
                "stdout": h.stdout,
                "additionalContext": h.context,
                "error": h.error,
                "log": h.log,
            }
        if self.mcp is not None:
            out["mcp"] = {
                "ok": self.mcp.ok,
                "detail": self.mcp.detail,
                "tools": self.mcp.tools,
                "ms": round(self.mcp.ms, 1),
            }
        return out

    def lines(self) -> list[str]:
        out: list[str] = []
        if self.hook is None:
            out.append("verify    no sessionwatch UserPromptSubmit hook is installed here")
        else:
            h = self.hook
            state = f"exit {h.returncode}" if h.returncode is not None else "no exit"
            out.append(f"verify    UserPromptSubmit through `{self.hook_command}`: {state} in {h.ms:.0f} ms")
            if h.error:
                out.append(f"          the host would not take it: {h.error}")
            elif h.context:
                out.append("          the model would read:")
                out += [f"            {line}" for line in h.context.splitlines()]
            else:
                out.append("          the model would read nothing: no notice is pending for this session")
            out += [f"          log: {line}" for line in h.log[-5:]]
        if self.mcp is not None:
            m = self.mcp
            tools = f" ({', '.join(m.tools)})" if m.tools else ""
            out.append(f"verify    MCP server: {'ok' if m.ok else 'FAILED'}: {m.detail}{tools}")
        return out


def verify(t: Target) -> Verification:
    """Fire a sample UserPromptSubmit through the hook command as written in the host's file, and start
    the MCP server as the host would."""
    found = find(t)
    # With HTTP hooks (gateway mode) the command hook of SessionStart stands in: firing the gateway's own
    # route would hand a real pending notice to the sample.
    command = found.hooks.get(USER_PROMPT_SUBMIT) or next(iter(found.hooks.values()), None)
    hook = run_hook(command, t.dir, t.sample_payload(USER_PROMPT_SUBMIT), t.hook_env()) if command is not None else None
    mcp = probe_mcp(found.server, t.dir, t.mcp_env(found.server)) if found.server is not None else None
    return Verification(command, hook, mcp)


T = TypeVar("T", bound=Target)


class FileInstaller(Generic[T]):
    """The ``installer.Installer`` of a room whose host reads our hooks from its config files: its ``Target``
    class says where the files are and what goes in them; this does the rest the same way for each."""

    path_hint = "`sessionwatch` is not on this PATH: the host finds the command through its PATH"
    quiet_version = False

    def __init__(self, target_class: type[T], program: str) -> None:
        self.target_class = target_class
        self.program = program

    def target(
        self,
        scope: str = "project",
        directory: str | os.PathLike[str] | None = None,
        session: str | None = None,
        agent: str | None = None,
        global_args: list[str] | None = None,
    ) -> T:
        return make_target(self.target_class, scope, directory, session, agent, global_args)

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
        t = self.target(scope, directory, session, agent, global_args)
        check_options(t)
        return Installation(t.install(trust=trust), lambda: verify(t))

    def uninstall(self, scope: str, directory: str | None) -> list[Change]:
        t = self.target(scope, directory)
        if t.scope == "local" and t.no_local is not None:
            raise InvalidArgument(t.no_local)
        return t.uninstall()

    def diagnose(self, scope: str, directory: str | None, *, probe: bool = True) -> Diagnosis:
        return diagnose(self.target(scope, directory), probe=probe)

    def version(self) -> str | None:
        return host_version(self.program)
