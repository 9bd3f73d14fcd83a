"""``sessionwatch install|uninstall|doctor claude-code``: the hooks, the MCP server, the permission rule that lets
the model call its tools and the project server's approval, in Claude Code's own files, merged with what is
there (the kit: ``hosts/installer.py``; the checks: ``hosts/checks.py``).

Where (verified against the pinned real binary, see docs/hooks-claude-code.md):

=============  =======================================  =========================================
scope          hooks (+ permission)                     MCP server
=============  =======================================  =========================================
``--project``  ``<dir>/.claude/settings.json``          ``<dir>/.mcp.json``
``--local``    ``<dir>/.claude/settings.local.json``    ``~/.claude.json`` ``projects[<dir>]``
``--user``     ``~/.claude/settings.json``              ``~/.claude.json``
=============  =======================================  =========================================

(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude``.) A project install also puts the permission rule and the
server's approval into ``<dir>/.claude/settings.local.json`` (see ``_claude_files``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument
from .. import install_state as snapshots
from ..base import POST_TOOL_USE, SESSION_START, USER_PROMPT_SUBMIT
from ..checks import Check, FileInstaller, read_config
from ..hook_budget import budget_s
from ..installer import (
    SERVER_NAME,
    Change,
    Edit,
    Format,
    JsonFormat,
    Skip,
    Target,
    add_hooks,
    add_to_list,
    drop_from_list,
    fix_command,
    install_file,
    is_our_server,
    revert_file,
    strip_hooks,
)
from .room import HOOK, MCP_SESSION_ENV, PROGRAM

PERMISSION = f"mcp__{SERVER_NAME}"  # Claude Code: every tool of the server


def http_hook_timeout() -> float | int:
    """How long Claude Code waits for a gateway's answer to an HTTP hook (seconds; it takes fractions):
    the hook budget (``hook_budget.py``: 2 s, or ``SESSIONWATCH_HOOK_BUDGET`` where install runs), the
    bound a command hook keeps on a gateway that does not answer. An HTTP hook cannot remember a gateway
    as down, so a hung gateway costs every prompt and tool call this much (docs/hooks-claude-code.md)."""
    seconds = budget_s()
    return int(seconds) if seconds == int(seconds) else seconds


def claude_dir() -> Path:
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def claude_state_file() -> Path:
    """``~/.claude.json``: Claude Code's own state, with the user and local MCP servers."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) / ".claude.json" if env else Path.home() / ".claude.json"


@dataclass
class ClaudeTarget(Target):
    adapter = HOOK

    @property
    def hooks_path(self) -> Path:
        if self.scope == "user":
            return claude_dir() / "settings.json"
        name = "settings.local.json" if self.scope == "local" else "settings.json"
        return self.dir / ".claude" / name

    @property
    def mcp_path(self) -> Path:
        return self.dir / ".mcp.json" if self.scope == "project" else claude_state_file()

    def server(self) -> dict[str, Any] | None:
        """The MCP server entry, with or without --session: Claude Code hands the server its session id,
        which makes the key."""
        argv = self.server_argv()
        return {"command": argv[0], "args": argv[1:], "alwaysLoad": True}  # its tools in the first request,
        # not deferred behind ToolSearch

    def http_hook_url(self, event: str) -> str | None:
        """In gateway mode, Claude Code posts its hooks to the gateway (no process per prompt or tool call),
        except SessionStart, which Claude Code never sends to an HTTP hook."""
        gateway = self.gateway()
        if gateway is None or event == SESSION_START:
            return None
        return self.own_hook_url(gateway)

    def handler(self, event: str) -> dict[str, Any]:
        out = super().handler(event)
        if out["type"] == "http":
            out["timeout"] = http_hook_timeout()
        return out

    def group(self, event: str) -> dict[str, Any]:
        out = super().group(event)
        if event == POST_TOOL_USE:
            out = {"matcher": "*", **out}  # every tool (Codex: no matcher means every tool)
        return out

    def install(self, *, trust: bool = True) -> list[Change]:
        return [install_file(self, path, fmt, *edits) for path, fmt, edits in _claude_files(self)]

    def uninstall(self) -> list[Change]:
        folders: list[str] = []  # created by install: removed at the end, when all their files are gone
        changes = [revert_file(self, path, fmt, edits[1], folders) for path, fmt, edits in _claude_files(self)]
        snapshots.remove_folders(folders)
        return changes

    # -- doctor --
    def read_server(self) -> tuple[Any, Check | None]:
        mcp, problem = read_config(self.mcp_path, JsonFormat)
        servers = _servers_of(self, mcp, create=False) if isinstance(mcp, dict) else None
        return (servers.get(SERVER_NAME) if servers else None), problem

    def server_checks(self, server: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        if server.get("alwaysLoad") is not True:
            out.append(
                Check("mcp", False, "the tools are deferred behind ToolSearch (no alwaysLoad)", fix_command(self))
            )
        return out + _claude_permission(self)

    def sample_payload(self, event: str) -> dict[str, Any]:
        out = super().sample_payload(event)
        if "turn_id" in out:
            out["prompt_id"] = out.pop("turn_id")
        return out

    def hook_env(self) -> dict[str, str]:
        return {"CLAUDE_PROJECT_DIR": str(self.dir)}

    def mcp_env(self, server: dict[str, Any]) -> dict[str, str]:
        # Claude Code hands its servers the session's id too: a server installed without --session finds its
        # key from it (hosts/identity.mcp_session_key); the id is the sample payload's
        session = str(self.sample_payload(USER_PROMPT_SUBMIT)["session_id"])
        return {**os.environ, "CLAUDE_PROJECT_DIR": str(self.dir), MCP_SESSION_ENV: session}


def _claude_settings(t: ClaudeTarget, path: Path, hooks: bool) -> tuple[Edit, Edit]:
    """A settings file: our hooks (``hooks``); with an MCP server, the rule that permits calling its
    tools and, for the project's ``.mcp.json`` server, its approval (without which the TUI's "New MCP
    server found" dialog defaults to running without it). These two are shared entries: one install
    takes them out only when no other install needs them and they were not there before."""
    shared: list[tuple[tuple[str, ...], str, str]] = [(("permissions", "allow"), PERMISSION, "permission")]
    if t.scope == "project":
        shared.append((("enabledMcpjsonServers",), SERVER_NAME, "approval"))

    def add(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = add_hooks(t, data, path) if hooks else []
        if t.server() is None or snap is None:
            return what
        needs: dict[str, list[str]] = snap.extra.setdefault("needs", {})
        preexisting: list[str] = snap.extra.setdefault("preexisting", [])
        for keys, item, label in shared:
            needed = any(label in v for v in needs.values())
            if add_to_list(data, keys, item, path):
                what.append(f"{label} {item}")
            elif not needed and label not in preexisting:
                preexisting.append(label)  # the person had it already: never ours to take out
            mine = needs.setdefault(t.owner, [])
            if label not in mine:
                mine.append(label)
        return what

    def strip(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = strip_hooks(t, data) if hooks else []
        if snap is None:
            return what
        needs: dict[str, list[str]] = snap.extra.get("needs", {})
        mine = needs.pop(t.owner, [])
        for keys, item, label in shared:
            if label not in mine or label in snap.extra.get("preexisting", []):
                continue
            if any(label in v for v in needs.values()):
                continue  # another install still needs it
            if drop_from_list(data, keys, item):
                what.append(f"{label} {item}")
        return what

    return add, strip


def _claude_files(t: ClaudeTarget) -> list[tuple[Path, Format, tuple[Edit, Edit]]]:
    """The files a Claude Code install edits, in order. A project install also puts the permission rule
    and the approval into this person's ``settings.local.json``: Claude Code ignores the permission rules
    of a committed ``settings.json`` until the person accepted the workspace trust dialog (in ``-p`` runs
    it never asks), and honours the per-person file at once."""
    files: list[tuple[Path, Format, tuple[Edit, Edit]]] = [
        (t.hooks_path, JsonFormat, _claude_settings(t, t.hooks_path, True))
    ]
    if t.scope == "project":
        local = t.dir / ".claude" / "settings.local.json"
        files.append((local, JsonFormat, _claude_settings(t, local, False)))
    files.append((t.mcp_path, JsonFormat, _claude_mcp(t)))
    return files


def _servers_of(t: ClaudeTarget, data: dict[str, Any], create: bool) -> dict[str, Any] | None:
    """The ``mcpServers`` object this scope's server goes in (Claude Code)."""
    holder: Any = data
    if t.scope == "local":
        projects = data.setdefault("projects", {}) if create else data.get("projects")
        if not isinstance(projects, dict):
            if create:
                raise InvalidArgument(f"{t.mcp_path}: 'projects' is not an object; nothing was changed")
            return None
        holder = projects.setdefault(str(t.dir), {}) if create else projects.get(str(t.dir))
    if not isinstance(holder, dict):
        if create:
            raise InvalidArgument(f"{t.mcp_path}: projects[{str(t.dir)!r}] is not an object; nothing was changed")
        return None
    servers = holder.setdefault("mcpServers", {}) if create else holder.get("mcpServers")
    if not isinstance(servers, dict):
        if create:
            raise InvalidArgument(f"{t.mcp_path}: 'mcpServers' is not an object; nothing was changed")
        return None
    return servers


def _claude_mcp(t: ClaudeTarget) -> tuple[Edit, Edit]:
    def add(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        server = t.server()
        assert server is not None
        servers = _servers_of(t, data, create=True)
        assert servers is not None
        current = servers.get(SERVER_NAME)
        if current is not None and not is_our_server(current):
            raise Skip(f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is")
        if isinstance(current, dict) and {k: current.get(k) for k in server} == server:
            return []
        servers[SERVER_NAME] = {**(current or {}), **server}
        return [f"mcp server {SERVER_NAME}" + (" (updated)" if current else "")]

    def strip(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        servers = _servers_of(t, data, create=False)
        if servers is None or not is_our_server(servers.get(SERVER_NAME)):
            return []
        del servers[SERVER_NAME]
        if not servers:
            if t.scope == "local":
                project = data["projects"][str(t.dir)]
                del project["mcpServers"]
                if not project:
                    del data["projects"][str(t.dir)]
                    if not data["projects"]:
                        del data["projects"]
            else:
                del data["mcpServers"]
        return [f"mcp server {SERVER_NAME}"]

    return add, strip


def _workspace_trusted(t: ClaudeTarget) -> bool:
    """Did the person accept Claude Code's workspace trust dialog for the project (or a folder above)?"""
    data, _ = read_config(claude_state_file(), JsonFormat)
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        return False
    for folder in (t.dir, *t.dir.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted") is True:
            return True
    return False


def _claude_permission(t: ClaudeTarget) -> list[Check]:
    """The rule that permits calling the tools, and (for ``.mcp.json``) the approval of the server. The
    committed ``settings.json`` counts only in a trusted workspace (Claude Code ignores its permission
    rules otherwise, and says so on stderr)."""
    personal = [claude_dir() / "settings.json", t.dir / ".claude" / "settings.local.json"]
    committed = t.dir / ".claude" / "settings.json"
    rules = (PERMISSION, f"{PERMISSION}__*")
    allowed, committed_only, denied, enabled, disabled = False, False, False, False, False
    for path in [*personal, committed]:
        data, _ = read_config(path, JsonFormat)
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


INSTALLER = FileInstaller(ClaudeTarget, PROGRAM)
