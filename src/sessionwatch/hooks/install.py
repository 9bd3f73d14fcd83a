"""``sessionwatch install|uninstall claude-code|codex``: write the hooks and the MCP server registration
into the host's own config files, merged with what is there.

Where (the hosts' documentation: Claude Code "Hooks reference" and "Connect Claude Code to tools via MCP";
Codex "Hooks" and "Model Context Protocol"):

============  ========================================  ==========================================
host/scope    hooks                                      MCP server
============  ========================================  ==========================================
claude-code   ``<dir>/.claude/settings.json``            ``<dir>/.mcp.json`` (``mcpServers``)
 --user       ``~/.claude/settings.json``                ``~/.claude.json`` (``mcpServers``)
codex         ``<dir>/.codex/hooks.json``                ``<dir>/.codex/config.toml`` (``[mcp_servers.*]``)
 --user       ``~/.codex/hooks.json``                    ``~/.codex/config.toml``
============  ========================================  ==========================================

(``$CLAUDE_CONFIG_DIR`` and ``$CODEX_HOME`` replace ``~/.claude`` and ``~/.codex``.)

What is ours is recognised by its command: a hook handler running ``sessionwatch ... hook <host>``, an MCP
server named ``sessionwatch`` running ``sessionwatch ... mcp``. Installing adds or updates exactly those
(other hooks and servers are never touched; a ``sessionwatch`` server someone else wrote is left alone),
keeps the previous file as ``<file>.sessionwatch-backup``, and changes nothing when all is in place.
Uninstall removes exactly those entries, and the containers that only held them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from .hosts import HOSTS, POST_TOOL_USE

SERVER_NAME = "sessionwatch"
HOOK_TIMEOUT_S = 10  # the host's limit for one run; ours answers in well under a second
BACKUP_SUFFIX = ".sessionwatch-backup"


@dataclass
class Change:
    path: str
    action: str  # created, updated, unchanged, removed, skipped
    what: list[str] = field(default_factory=list)
    backup: str | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "action": self.action, "what": self.what}
        if self.backup:
            out["backup"] = self.backup
        if self.note:
            out["note"] = self.note
        return out


def sessionwatch_argv() -> list[str]:
    """How a host should start this very installation: the console script beside the interpreter, else
    ``python -m sessionwatch``; absolute, so the host's PATH does not matter."""
    script = Path(sys.executable).with_name("sessionwatch")
    if script.is_file():
        return [str(script)]
    found = shutil.which("sessionwatch")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "sessionwatch"]


def _is_sessionwatch(tokens: list[str]) -> bool:
    for i, tok in enumerate(tokens):
        if os.path.basename(tok) == "sessionwatch":
            return True
        if tok == "-m" and i + 1 < len(tokens) and tokens[i + 1] == "sessionwatch":
            return True
    return False


def is_our_hook(command: object, host: str) -> bool:
    if not isinstance(command, str):
        return False
    try:
        tokens = shlex.split(command)
    except ValueError:
        return False
    pairs = any(a == "hook" and b == host for a, b in pairwise(tokens))
    return pairs and _is_sessionwatch(tokens)


def is_our_server(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    raw_args = entry.get("args")
    args = raw_args if isinstance(raw_args, list) else []
    tokens = [entry["command"], *[a for a in args if isinstance(a, str)]]
    return "mcp" in tokens and _is_sessionwatch(tokens)


@dataclass
class Target:
    host: str
    user: bool
    dir: Path
    session: str | None
    agent: str | None
    global_args: list[str]

    @property
    def hooks_path(self) -> Path:
        if self.host == "claude-code":
            return (_claude_dir() if self.user else self.dir / ".claude") / "settings.json"
        return (_codex_dir() if self.user else self.dir / ".codex") / "hooks.json"

    @property
    def mcp_path(self) -> Path:
        if self.host == "claude-code":
            if self.user:
                env = os.environ.get("CLAUDE_CONFIG_DIR")
                return Path(env) / ".claude.json" if env else Path.home() / ".claude.json"
            return self.dir / ".mcp.json"
        return (_codex_dir() if self.user else self.dir / ".codex") / "config.toml"

    def hook_command(self) -> str:
        argv = [*sessionwatch_argv(), *self.global_args, "hook", self.host]
        if self.session:
            argv += ["--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        return shlex.join(argv)

    def server(self) -> dict[str, Any] | None:
        if not self.session:
            return None
        argv = [*sessionwatch_argv(), *self.global_args, "mcp", "--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        return {"command": argv[0], "args": argv[1:]}

    def group(self, event: str) -> dict[str, Any]:
        handler: dict[str, Any] = {"type": "command", "command": self.hook_command(), "timeout": HOOK_TIMEOUT_S}
        out: dict[str, Any] = {"hooks": [handler]}
        if event == POST_TOOL_USE and self.host == "claude-code":
            out = {"matcher": "*", **out}  # every tool (Codex: no matcher means every tool)
        return out


def _claude_dir() -> Path:
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def _codex_dir() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


# -- files -------------------------------------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _write(path: Path, text: str, existed: bool) -> str | None:
    """Write atomically; the previous content is kept beside it first. Returns the backup path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if existed:
        backup = str(path) + BACKUP_SUFFIX
        shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".sessionwatch-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return backup


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- hooks (the same shape in Claude Code settings and Codex hooks.json) --------------------------------
def _install_hooks(t: Target) -> Change:
    path = t.hooks_path
    data = _read_json(path)
    existed = data is not None
    data = data if data is not None else {}
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument(f"{path}: 'hooks' is not an object; nothing was changed")
    want = t.hook_command()
    what: list[str] = []
    for event in HOSTS[t.host].events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"{path}: hooks.{event} is not a list; nothing was changed")
        seen = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for h in list(handlers):
                if isinstance(h, dict) and is_our_hook(h.get("command"), t.host):
                    if seen:  # a duplicate of ours: one is enough
                        handlers.remove(h)
                        what.append(f"{event} (duplicate removed)")
                    elif h.get("command") != want:
                        h["command"] = want
                        what.append(f"{event} (updated)")
                    seen = True
        if not seen:
            groups.append(t.group(event))
            what.append(event)
    return _finish(path, data, existed, [f"hook {w}" for w in what])


def _uninstall_hooks(t: Target) -> Change:
    path = t.hooks_path
    data = _read_json(path)
    if data is None or not isinstance(data.get("hooks"), dict):
        return Change(str(path), "unchanged")
    hooks = data["hooks"]
    what: list[str] = []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        for group in list(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            ours = [h for h in handlers if isinstance(h, dict) and is_our_hook(h.get("command"), t.host)]
            if not ours:
                continue
            for h in ours:
                handlers.remove(h)
            what.append(event)
            if not handlers:
                groups.remove(group)
        if not groups and event in what:
            del hooks[event]
    if not hooks and what:
        del data["hooks"]
    return _finish(path, data, True, [f"hook {w}" for w in what], removing=True)


def _finish(path: Path, data: dict[str, Any], existed: bool, what: list[str], removing: bool = False) -> Change:
    if not what:
        return Change(str(path), "unchanged")
    if removing and not data:
        backup = str(path) + BACKUP_SUFFIX
        shutil.copy2(path, backup)
        path.unlink()  # nothing but ours was in it
        return Change(str(path), "removed", what, backup)
    written = _write(path, _json_text(data), existed)
    return Change(str(path), ("updated" if existed else "created"), what, written)


# -- the MCP server ------------------------------------------------------------------------------------
def _install_server(t: Target) -> Change:
    path = t.mcp_path
    server = t.server()
    if server is None:
        return Change(
            str(path),
            "skipped",
            note="no MCP server registered: it binds one session, give --session KEY to register it",
        )
    if t.host == "codex":
        return _toml_server(path, server)
    data = _read_json(path)
    existed = data is not None
    data = data if data is not None else {}
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidArgument(f"{path}: 'mcpServers' is not an object; nothing was changed")
    current = servers.get(SERVER_NAME)
    if current is not None and not is_our_server(current):
        return Change(
            str(path),
            "skipped",
            note=f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is",
        )
    if current is not None and {k: current.get(k) for k in server} == server:
        return Change(str(path), "unchanged")
    servers[SERVER_NAME] = {**(current or {}), **server}
    return _finish(path, data, existed, [f"mcp server {SERVER_NAME}" + (" (updated)" if current else "")])


def _uninstall_server(t: Target) -> Change:
    path = t.mcp_path
    if t.host == "codex":
        return _toml_server(path, None)
    data = _read_json(path)
    servers = data.get("mcpServers") if data is not None else None
    if data is None or not isinstance(servers, dict) or not is_our_server(servers.get(SERVER_NAME)):
        return Change(str(path), "unchanged")
    del servers[SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    return _finish(path, data, True, [f"mcp server {SERVER_NAME}"], removing=True)


def _toml_server(path: Path, server: dict[str, Any] | None) -> Change:
    """Codex keeps MCP servers in ``config.toml`` as ``[mcp_servers.<name>]`` tables; tomlkit keeps the
    user's comments and layout."""
    import tomlkit

    existed = path.exists()
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8")) if existed else tomlkit.document()
    except Exception as exc:  # noqa: BLE001 - tomlkit raises several types; each means the file is not TOML
        raise InvalidArgument(f"{path} is not valid TOML ({exc}); nothing was changed") from None
    servers = doc.get("mcp_servers")
    current = servers.get(SERVER_NAME) if servers is not None else None
    plain = current.unwrap() if current is not None and hasattr(current, "unwrap") else current
    if server is None:  # uninstall
        if not is_our_server(plain):
            return Change(str(path), "unchanged")
        del servers[SERVER_NAME]  # type: ignore[union-attr]
        if not servers:
            del doc["mcp_servers"]
        if not doc.unwrap():
            backup = str(path) + BACKUP_SUFFIX
            shutil.copy2(path, backup)
            path.unlink()
            return Change(str(path), "removed", [f"mcp server {SERVER_NAME}"], backup)
        return Change(
            str(path),
            "updated",
            [f"mcp server {SERVER_NAME} removed"],
            _write(path, tomlkit.dumps(doc).rstrip("\n") + "\n", True),
        )
    if plain is not None and not is_our_server(plain):
        return Change(
            str(path),
            "skipped",
            note=f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is",
        )
    if plain is not None and {k: plain.get(k) for k in server} == server:
        return Change(str(path), "unchanged")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    table = tomlkit.table()
    table["command"] = server["command"]
    table["args"] = server["args"]
    servers[SERVER_NAME] = table
    written = _write(path, tomlkit.dumps(doc), existed)
    return Change(
        str(path),
        "updated" if existed else "created",
        [f"mcp server {SERVER_NAME}" + (" (updated)" if plain is not None else "")],
        written,
    )


# -- entry points --------------------------------------------------------------------------------------
def install(
    host: str,
    *,
    user: bool = False,
    directory: str | os.PathLike[str] | None = None,
    session: str | None = None,
    agent: str | None = None,
    global_args: list[str] | None = None,
) -> list[Change]:
    t = Target(host, user, Path(directory or os.getcwd()).resolve(), session, agent, list(global_args or []))
    return [_install_hooks(t), _install_server(t)]


def uninstall(host: str, *, user: bool = False, directory: str | os.PathLike[str] | None = None) -> list[Change]:
    t = Target(host, user, Path(directory or os.getcwd()).resolve(), None, None, [])
    return [_uninstall_hooks(t), _uninstall_server(t)]
