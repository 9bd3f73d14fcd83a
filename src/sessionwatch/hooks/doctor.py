"""``sessionwatch doctor`` and ``install --verify``: is what install wrote usable, as each host will use it?

Per host and scope: our hooks are there and their command runs (a sample payload through it, as the host
would send it), Codex trusts them, the MCP server starts and lists its tools in the environment the host
gives it, the host may call them (Claude Code's permission rule and project-server approval; Codex
waits for it and passes the token), the store or gateway answers, and the host's version. Every failure
comes with the command that fixes it. Nothing here changes a config file; a sample payload runs with a
throwaway state folder, so it can neither take nor acknowledge a notice meant for the host.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hosts import HOSTS, USER_PROMPT_SUBMIT
from .install import (
    HOOK_TIMEOUT_S,
    PERMISSION,
    SERVER_NAME,
    JsonFormat,
    Target,
    TomlFormat,
    _servers_of,
    claude_dir,
    claude_state_file,
    codex_user_config,
    fix_command,
    is_our_hook,
    is_our_http_hook,
    is_our_server,
    trust_step,
)
from .jsonrpc import LineClient, RpcError

MCP_TIMEOUT_S = 30.0  # Claude Code's and Codex's own connect timeouts are of this order
# What Codex hands an MCP server besides its env_vars (certificate variables too)
CODEX_BASE_ENV = ("HOME", "PATH", "LANG", "SHELL", "TERM", "USER", "LOGNAME", "SSL_CERT_FILE", "SSL_CERT_DIR")


@dataclass
class Check:
    name: str
    ok: bool | None  # None: a warning, or nothing to check
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


@dataclass
class ScopeReport:
    host: str
    scope: str
    dir: str | None
    installed: bool
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "scope": self.scope,
            "dir": self.dir,
            "installed": self.installed,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
        }


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


@dataclass
class Found:
    hooks: dict[str, str]  # event -> our command
    server: dict[str, Any] | None
    problems: list[Check]
    http: dict[str, str] = field(default_factory=dict)  # event -> the gateway URL of our HTTP hook


def _read(path: Path, fmt: type[JsonFormat] | type[TomlFormat]) -> tuple[Any, Check | None]:
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


def _find_pi(t: Target) -> Found:
    """Pi's extension: ours, its hook command, and whether it is the one this version writes."""
    from ..hosts.pi import install as pi

    text = pi.read(t.hooks_path)
    if text is None:
        return Found({}, None, [], {})
    command = pi.command_of(text)
    if command is None:
        problem = Check("files", False, f"{t.hooks_path} is not sessionwatch's extension", f"move {t.hooks_path} away")
        return Found({}, None, [problem], {})
    problems = []
    if text != pi.render(command):
        problems.append(
            Check("files", False, f"{t.hooks_path} is not the extension this sessionwatch writes", fix_command(t))
        )
    joined = shlex.join(command)
    return Found(dict.fromkeys((*HOSTS["pi"].events, *HOSTS["pi"].observes), joined), None, problems, {})


def find(t: Target) -> Found:
    if t.host == "pi":
        return _find_pi(t)
    problems: list[Check] = []
    hooks: dict[str, str] = {}
    http: dict[str, str] = {}
    data, problem = _read(t.hooks_path, JsonFormat)
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
    if t.host == "claude-code":
        mcp, problem = _read(t.mcp_path, JsonFormat)
        servers = _servers_of(t, mcp, create=False) if isinstance(mcp, dict) else None
        entry = servers.get(SERVER_NAME) if servers else None
    else:
        mcp, problem = _read(t.mcp_path, TomlFormat)
        tables = mcp.get("mcp_servers") if mcp is not None else None
        entry = tables.get(SERVER_NAME) if tables is not None else None
        entry = entry.unwrap() if entry is not None and hasattr(entry, "unwrap") else entry
    if problem:
        problems.append(problem)
    if is_our_server(entry):
        server = dict(entry)  # type: ignore[arg-type]
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
    return Target(t.host, t.scope, t.dir, session, c.agent, c.global_args)


# -- probes ----------------------------------------------------------------------------------------------
def sample_payload(host: str, event: str, cwd: Path) -> dict[str, Any]:
    """What the host sends on ``event`` (fields as the real binaries send them; see the host docs)."""
    base: dict[str, Any] = {
        "session_id": "sessionwatch-verify",
        "transcript_path": None,
        "cwd": str(cwd),
        "hook_event_name": event,
        "permission_mode": "default",
    }
    if host == "pi":  # what the extension sends (no prompt text: a sample must not be recorded as one)
        base.pop("permission_mode")
        if event == USER_PROMPT_SUBMIT:
            base.update(prompt_source="rpc", has_ui=False)
        return base
    if event == USER_PROMPT_SUBMIT:
        base["prompt"] = "sessionwatch verify"
        base["prompt_id" if host == "claude-code" else "turn_id"] = "verify-1"
    else:
        base["source"] = "startup"
    if host == "codex":
        base["model"] = "verify"
    return base


@dataclass
class HookRun:
    returncode: int | None
    stdout: str
    stderr: str
    ms: float
    context: str | None  # what the model would read; None: nothing
    error: str | None  # why the host would not take the answer
    log: list[str]


def run_hook(host: str, command: str, cwd: Path, event: str = USER_PROMPT_SUBMIT) -> HookRun:
    """Fire a sample payload through ``command`` through a shell, in ``cwd``, as the host would."""
    payload = json.dumps(sample_payload(host, event, cwd))
    with tempfile.TemporaryDirectory(prefix="sessionwatch-verify-") as tmp:
        env = {**os.environ, "SESSIONWATCH_STATE_DIR": tmp}
        if host == "claude-code":
            env["CLAUDE_PROJECT_DIR"] = str(cwd)
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


def mcp_env(host: str, server: dict[str, Any], cwd: Path) -> dict[str, str]:
    """The environment the host starts its MCP servers with."""
    if host == "claude-code":
        return {**os.environ, "CLAUDE_PROJECT_DIR": str(cwd)}
    names = [*CODEX_BASE_ENV, *[v for v in server.get("env_vars") or [] if isinstance(v, str)]]
    return {k: os.environ[k] for k in names if k in os.environ}


def probe_mcp(host: str, server: dict[str, Any], cwd: Path, timeout: float = MCP_TIMEOUT_S) -> McpProbe:
    """Start the server as the host would and list its tools (MCP ``initialize`` + ``tools/list``)."""
    env = mcp_env(host, server, cwd)
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


def host_version(host: str) -> str | None:
    binary = shutil.which({"claude-code": "claude", "pi": "pi"}.get(host, "codex"))
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else None


# -- the store or gateway ---------------------------------------------------------------------------------
def check_backend(global_args: list[str], session: str | None, agent: str | None) -> Check:
    """Does the hook's store or gateway answer, and does the session exist (a warning when not yet)?"""
    c = Command([], global_args, None, None)
    gateway = c.option("--gateway") or (None if c.option("--store") else os.environ.get("SESSIONWATCH_GATEWAY"))
    if gateway:
        return _check_gateway(gateway, c.option("--token") or os.environ.get("SESSIONWATCH_TOKEN"), session, agent)
    return _check_store(c.option("--store") or os.environ.get("SESSIONWATCH_STORE"), session, agent)


def _check_gateway(url: str, token: str | None, session: str | None, agent: str | None) -> Check:
    from ..client import GatewayClient
    from ..errors import Forbidden, NotFound, SessionwatchError, Unauthorized

    name = "gateway"
    try:
        with GatewayClient(url, token=token, timeout=2.0) as client:
            health = client.health()
            if session is None:
                return Check(name, True, f"{url} answers ({health.get('status')})")
            try:
                client.get_session(session, agent)
            except NotFound:
                return Check(name, None, f"{url} answers; session {session} does not exist yet (created on first use)")
            return Check(name, True, f"{url} answers; session {session} exists")
    except (Unauthorized, Forbidden) as exc:
        return Check(
            name,
            False,
            f"{url} refuses the token: {exc}",
            "export SESSIONWATCH_TOKEN=<a token for this agent> where the host runs",
        )
    except SessionwatchError as exc:
        return Check(
            name,
            False,
            f"{url} does not answer: {exc}",
            f"start it (sessionwatch serve) or fix the URL given to install ({url})",
        )


def _check_store(url: str | None, session: str | None, agent: str | None) -> Check:
    from ..errors import NotFound, SessionwatchError
    from ..store import POSTGRES_SCHEMES, default_sqlite_path

    name = "store"
    if url is None:
        path = default_sqlite_path()
        if not path.exists():
            return Check(name, None, f"no store yet at {path}: the MCP server creates it when the host first starts it")
        url = f"sqlite:///{path}"
    elif not url.startswith(POSTGRES_SCHEMES):
        from ..store.sqlite import sqlite_path

        try:
            path = Path(sqlite_path(url))
        except SessionwatchError as exc:
            return Check(name, False, str(exc), "give install a valid --store URL")
        if not path.exists():
            return Check(name, None, f"no store yet at {path}: the MCP server creates it when the host first starts it")
    from ..engine import Gateway  # the engine: only here, never on the hook's path
    from ..settings import settings_from_env

    try:
        backend = Gateway.open(url, timers=False, settings=settings_from_env(), read_only=True, prune_on_open=False)
    except SessionwatchError as exc:
        return Check(name, False, f"cannot open {url}: {exc}", "check the store URL and that the database is up")
    except Exception as exc:  # noqa: BLE001 - a driver's own error: the same finding
        return Check(name, False, f"cannot open {url}: {exc}", "check the store URL and that the database is up")
    try:
        if session is None:
            return Check(name, True, f"{_safe(url)} opens")
        try:
            backend.get_session(session, agent)
        except NotFound:
            return Check(name, None, f"{_safe(url)} opens; session {session} does not exist yet (created on first use)")
        return Check(name, True, f"{_safe(url)} opens; session {session} exists")
    finally:
        backend.close()


def _safe(url: str) -> str:
    """A store URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


# -- one scope ---------------------------------------------------------------------------------------------
def diagnose(base: Target, *, probe: bool = True) -> ScopeReport:
    found = find(base)
    t = installed_target(base, found)
    report = ScopeReport(
        t.host, t.scope, None if t.scope == "user" else str(t.dir), bool(found.hooks or found.server or found.http)
    )
    report.checks += found.problems
    if not report.installed:
        return report
    fix = fix_command(t)
    checks = report.checks
    events = (*HOSTS[t.host].events, *HOSTS[t.host].observes)
    missing = [e for e in events if e not in found.hooks and e not in found.http]
    if missing:
        checks.append(Check("hooks", False, f"missing in {t.hooks_path}: {', '.join(missing)}", fix))
    else:
        checks.append(Check("hooks", True, f"{', '.join(events)} in {t.hooks_path}"))
    command = next(iter(found.hooks.values()), None)
    if command is not None:
        checks.append(_check_command(t, command, probe))
        if t.host == "codex":
            checks.append(_check_trust(t, found))
    if t.host != "pi":  # Pi has no MCP: the extension is all there is
        checks += _check_mcp(t, found, probe)
    checks.append(check_backend(t.global_args, t.session, t.agent))
    return report


def _check_command(t: Target, command: str, probe: bool) -> Check:
    tokens = shlex.split(command)
    exe = tokens[0] if os.sep in tokens[0] else shutil.which(tokens[0])
    if exe is None or not os.access(exe, os.X_OK):
        how = "install sessionwatch where the host's PATH finds it" + (
            "" if t.scope != "project" else f", or use this person's files: {fix_command(_as(t, 'local'))}"
        )
        return Check("command", False, f"{tokens[0]} is not found on PATH", how)
    if not probe:
        return Check("command", True, f"{exe}")
    run = run_hook(t.host, command, t.dir)
    if run.error is not None:
        reason = run.error + (f" ({run.stderr.strip().splitlines()[-1]})" if run.stderr.strip() else "")
        return Check("command", False, f"the UserPromptSubmit hook fails: {reason}", f"{fix_command(t)} --verify")
    said = "adds a notice" if run.context else "adds nothing (no notice pending)"
    return Check("command", True, f"{exe}: a sample UserPromptSubmit answers in {run.ms:.0f} ms, exit 0, {said}")


def _as(t: Target, scope: str) -> Target:
    return Target(t.host, scope, t.dir, t.session, t.agent, t.global_args)


def _check_trust(t: Target, found: Found) -> Check:
    from .codex_trust import codex_path, status

    codex = codex_path()
    if codex is None:
        return Check("trusted", None, "cannot check: codex is not on PATH", trust_step(t))
    try:
        ours = status(codex, t.dir, t.hooks_path, lambda c: is_our_hook(c, "codex"))
    except RpcError as exc:
        return Check("trusted", None, f"cannot check: {exc}", trust_step(t))
    if not ours:
        if t.scope == "project":
            return Check(
                "trusted",
                False,
                f"Codex reads nothing of {t.dir / '.codex'}: the project is not trusted",
                fix_command(t),
            )
        return Check(
            "trusted",
            False,
            "Codex does not list the hooks (hooks turned off in config.toml?)",
            "remove `[features] hooks = false`",
        )
    bad = [
        f"{h.get('eventName')}: {h.get('trustStatus')}"
        for h in ours
        if h.get("trustStatus") not in ("trusted", "managed")
    ]
    if bad:
        return Check("trusted", False, f"Codex skips them without a word ({', '.join(bad)})", fix_command(t))
    return Check("trusted", True, f"Codex trusts all {len(ours)} ({codex_user_config()})")


def _check_mcp(t: Target, found: Found, probe: bool) -> list[Check]:
    fix = fix_command(t)
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
    out: list[Check] = []
    if t.host == "claude-code":
        if server.get("alwaysLoad") is not True:
            out.append(Check("mcp", False, "the tools are deferred behind ToolSearch (no alwaysLoad)", fix))
        out += _claude_permission(t)
    else:
        if server.get("required") is not True:
            out.append(
                Check(
                    "mcp",
                    False,
                    "Codex does not wait for the server (no required = true): a slow start misses the first request",
                    fix,
                )
            )
        env_vars = server.get("env_vars") or []
        if "SESSIONWATCH_TOKEN" not in env_vars:
            out.append(Check("mcp", False, "the server does not get SESSIONWATCH_TOKEN (env_vars)", fix))
    if probe:
        p = probe_mcp(t.host, server, t.dir)
        if p.ok:
            out.append(Check("mcp", True, f"{server['command']} starts: {p.detail}"))
        else:
            out.append(Check("mcp", False, f"the server does not start: {p.detail}", f"{fix_command(t)} --verify"))
    elif not out:
        out.append(Check("mcp", True, f"registered in {t.mcp_path}"))
    return out


def _workspace_trusted(t: Target) -> bool:
    """Did the person accept Claude Code's workspace trust dialog for the project (or a folder above)?"""
    data, _ = _read(claude_state_file(), JsonFormat)
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return False
    for folder in (t.dir, *t.dir.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted") is True:
            return True
    return False


def _claude_permission(t: Target) -> list[Check]:
    """The rule that permits calling the tools, and (for ``.mcp.json``) the approval of the server. The
    committed ``settings.json`` counts only in a trusted workspace (Claude Code ignores its permission
    rules otherwise, and says so on stderr)."""
    personal = [claude_dir() / "settings.json", t.dir / ".claude" / "settings.local.json"]
    committed = t.dir / ".claude" / "settings.json"
    rules = (PERMISSION, f"{PERMISSION}__*")
    allowed, committed_only, denied, enabled, disabled = False, False, False, False, False
    for path in [*personal, committed]:
        data, _ = _read(path, JsonFormat)
        if not isinstance(data, dict):
            continue
        perms: dict[str, Any] = data["permissions"] if isinstance(data.get("permissions"), dict) else {}
        allow, deny = perms.get("allow") or [], perms.get("deny") or []
        has = any(r in rules for r in allow)
        if path == committed and has and not allowed:
            committed_only = True
        else:
            allowed |= has
        denied |= any(r in rules for r in deny)
        approve = data.get("enabledMcpjsonServers") or []
        enabled |= SERVER_NAME in approve or data.get("enableAllProjectMcpServers") is True
        disabled |= SERVER_NAME in (data.get("disabledMcpjsonServers") or [])
    if committed_only and _workspace_trusted(t):
        allowed = True
    out: list[Check] = []
    fix = fix_command(t)
    if denied:
        out.append(
            Check("permitted", False, f"a deny rule refuses {PERMISSION}", f"remove {PERMISSION} from permissions.deny")
        )
    elif allowed:
        out.append(Check("permitted", True, f"permissions.allow has {PERMISSION}"))
    elif committed_only:
        detail = (
            f"the {PERMISSION} rule of .claude/settings.json is ignored until the workspace trust dialog is accepted"
        )
        out.append(Check("permitted", False, detail, f"{fix} (writes it into settings.local.json too)"))
    else:
        out.append(Check("permitted", False, f"every call is refused: no permissions.allow rule for {PERMISSION}", fix))
    if t.scope == "project":
        if disabled:
            out.append(
                Check(
                    "approved",
                    False,
                    "the project's server is in disabledMcpjsonServers",
                    "remove it there (settings.local.json)",
                )
            )
        elif not enabled:
            out.append(
                Check(
                    "approved", False, "the TUI asks about the .mcp.json server and defaults to running without it", fix
                )
            )
        else:
            out.append(Check("approved", True, "enabledMcpjsonServers has sessionwatch"))
    return out


def scopes_of(host: str) -> tuple[str, ...]:
    return ("project", "local", "user") if host == "claude-code" else ("project", "user")


# -- install --verify --------------------------------------------------------------------------------------
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


def verify(t: Target) -> Verification:
    """Fire a sample UserPromptSubmit through the hook command as written in the host's file, and start
    the MCP server as the host would."""
    found = find(t)
    # With HTTP hooks (gateway mode) the command hook of SessionStart stands in: firing the gateway's own
    # route would hand a real pending notice to the sample.
    command = found.hooks.get(USER_PROMPT_SUBMIT) or next(iter(found.hooks.values()), None)
    hook = run_hook(t.host, command, t.dir) if command is not None else None
    mcp = probe_mcp(t.host, found.server, t.dir) if found.server is not None else None
    return Verification(command, hook, mcp)
