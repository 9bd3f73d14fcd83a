"""``sessionwatch install|uninstall claude-code|codex``: write the hooks, the MCP server and what makes
them usable into the host's own config files, merged with what is there.

Where (verified against the pinned real binaries, see docs/hooks-claude-code.md and docs/hooks-codex.md):

=================  ===================================  =========================================
host / scope       hooks (+ permission)                 MCP server
=================  ===================================  =========================================
claude-code        ``<dir>/.claude/settings.json``      ``<dir>/.mcp.json``
 ``--local``       ``<dir>/.claude/settings.local.json``  ``~/.claude.json`` ``projects[<dir>]``
 ``--user``        ``~/.claude/settings.json``          ``~/.claude.json``
codex              ``<dir>/.codex/hooks.json``          ``<dir>/.codex/config.toml``
 ``--user``        ``~/.codex/hooks.json``              ``~/.codex/config.toml``
=================  ===================================  =========================================

(``$CLAUDE_CONFIG_DIR`` and ``$CODEX_HOME`` replace ``~/.claude`` and ``~/.codex``.) The project scope's
files are meant to be committed, so they hold no path of this machine: the command is ``sessionwatch``,
found on the host's ``PATH``. The per-person files (``--local``, ``--user``) name this installation's
absolute path. A Claude Code project install also puts the permission rule and the server's approval into
``<dir>/.claude/settings.local.json`` (see ``_claude_files``). Codex hook trust lives in the user's
``config.toml`` and is written by Codex itself (see ``codex_trust``).

What is ours is recognised by its command: a hook handler running ``sessionwatch ... hook <host>``, an MCP
server named ``sessionwatch`` running ``sessionwatch ... mcp``. Installing adds or updates exactly those
(other hooks and servers are never touched; a ``sessionwatch`` server someone else wrote is left alone)
and changes nothing when all is in place. What each file held before is kept in the state folder
(``install_state``); uninstall gives it back byte for byte while the file is as install left it, and
otherwise takes out exactly our entries.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import InvalidArgument
from ..keys import parse_key
from . import install_state as snapshots
from .hosts import HOSTS, POST_TOOL_USE, SESSION_START
from .identity import agent_from_folder

SERVER_NAME = "sessionwatch"
HOOK_TIMEOUT_S = 10  # the host's limit for one run; ours answers in well under a second
PERMISSION = f"mcp__{SERVER_NAME}"  # Claude Code: every tool of the server
# Codex starts MCP servers with a bare environment; these decide which store or gateway the server
# uses and how it authenticates, so they pass through (an unset one is simply absent)
# what Codex passes its MCP server from the environment it runs in (it passes almost nothing by default);
# CODEX_HOME: where the TUI's daemon listens, for the push (codex_push.py)
CODEX_ENV_VARS = ["SESSIONWATCH_TOKEN", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "XDG_STATE_HOME", "CODEX_HOME"]
SCOPES = ("project", "local", "user")


@dataclass
class Change:
    path: str
    action: str  # created, updated, unchanged, removed, restored, skipped, trusted, failed
    what: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "action": self.action, "what": self.what}
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


HTTP_HOOK_PATH = "/hooks/"  # .../v1/sessions/{key}/hooks/{host}: the gateway's hook route
OWN_HOOK_PATH = "/v1/hooks/"  # .../v1/hooks/{host}: the same, for each host session's own key
TOKEN_ENV = "SESSIONWATCH_TOKEN"


def is_our_http_hook(handler: object, host: str) -> bool:
    """A Claude Code HTTP hook posting to a gateway's hook route for ``host``."""
    if not isinstance(handler, dict) or handler.get("type") != "http" or not isinstance(handler.get("url"), str):
        return False
    path = handler["url"].split("?", 1)[0]
    return ("/v1/sessions/" in path and path.endswith(f"{HTTP_HOOK_PATH}{host}")) or path.endswith(
        f"{OWN_HOOK_PATH}{host}"
    )


def is_ours(handler: object, host: str) -> bool:
    """One of our hook handlers: a command running ``sessionwatch ... hook HOST``, or an HTTP hook."""
    return isinstance(handler, dict) and (is_our_hook(handler.get("command"), host) or is_our_http_hook(handler, host))


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


def claude_dir() -> Path:
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) if env else Path.home() / ".claude"


def claude_state_file() -> Path:
    """``~/.claude.json``: Claude Code's own state, with the user and local MCP servers."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env) / ".claude.json" if env else Path.home() / ".claude.json"


def codex_dir() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


@dataclass
class Target:
    host: str
    scope: str  # project, local or user
    dir: Path
    session: str | None = None
    agent: str | None = None
    global_args: list[str] = field(default_factory=list)

    @property
    def owner(self) -> str:
        """Which install a shared file's snapshot is for (``~/.claude.json`` serves several)."""
        return f"{self.host}:{self.scope}:{'' if self.scope == 'user' else self.dir}"

    @property
    def committed(self) -> bool:
        """Its files are meant to be committed: no path of this machine goes in."""
        return self.scope == "project"

    @property
    def hooks_path(self) -> Path:
        if self.host == "pi":  # the extension, with the hook command in it (hosts/pi/install.py)
            from ..hosts.pi.install import extension_path

            return extension_path(self.scope, self.dir)
        if self.host == "claude-code":
            if self.scope == "user":
                return claude_dir() / "settings.json"
            name = "settings.local.json" if self.scope == "local" else "settings.json"
            return self.dir / ".claude" / name
        return (codex_dir() if self.scope == "user" else self.dir / ".codex") / "hooks.json"

    @property
    def mcp_path(self) -> Path:
        if self.host == "claude-code":
            return self.dir / ".mcp.json" if self.scope == "project" else claude_state_file()
        return (codex_dir() if self.scope == "user" else self.dir / ".codex") / "config.toml"

    def argv0(self) -> list[str]:
        return ["sessionwatch"] if self.committed else sessionwatch_argv()

    def hook_command(self) -> str:
        argv = [*self.argv0(), *self.global_args, "hook", self.host]
        if self.session:
            argv += ["--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        return shlex.join(argv)

    def server(self) -> dict[str, Any] | None:
        """The MCP server entry; without --session only Claude Code gets one (it hands the server its
        session id, which makes the key); Codex tells its servers nothing of the session. Pi has no MCP."""
        if (not self.session and self.host != "claude-code") or self.host == "pi":
            return None
        argv = [*self.argv0(), *self.global_args, "mcp"]
        if self.session:
            argv += ["--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        out: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
        if self.host == "claude-code":
            out["alwaysLoad"] = True  # its tools in the first request, not deferred behind ToolSearch
        else:
            out["env_vars"] = list(CODEX_ENV_VARS)
            out["env"] = {"SESSIONWATCH_HOST_CLI": "codex"}  # the server pushes through the TUI's daemon
            out["required"] = True  # Codex waits for it (otherwise a slow start misses the first request)
        return out

    def gateway(self) -> str | None:
        for flag, value in zip(self.global_args, self.global_args[1:], strict=False):
            if flag == "--gateway":
                return value
        return None

    def http_hook_url(self, event: str) -> str | None:
        """In gateway mode with a session, Claude Code posts its hooks to the gateway (no process per
        prompt or tool call), except SessionStart, which Claude Code never sends to an HTTP hook."""
        gateway = self.gateway()
        if self.host != "claude-code" or gateway is None or event == SESSION_START:
            return None
        if self.session is None:  # each host session's own key, made by the gateway from the input
            url = f"{gateway.rstrip('/')}{OWN_HOOK_PATH}{self.host}"
        else:
            url = f"{gateway.rstrip('/')}/v1/sessions/{quote(self.session, safe=':@')}{HTTP_HOOK_PATH}{self.host}"
        return url + (f"?agentId={quote(self.agent, safe='')}" if self.agent else "")

    def handler(self, event: str) -> dict[str, Any]:
        url = self.http_hook_url(event)
        if url is not None:
            return {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer ${TOKEN_ENV}"},
                "allowedEnvVars": [TOKEN_ENV],
                "timeout": HOOK_TIMEOUT_S,
            }
        return {"type": "command", "command": self.hook_command(), "timeout": HOOK_TIMEOUT_S}

    def group(self, event: str) -> dict[str, Any]:
        out: dict[str, Any] = {"hooks": [self.handler(event)]}
        if event == POST_TOOL_USE and self.host == "claude-code":
            out = {"matcher": "*", **out}  # every tool (Codex: no matcher means every tool)
        return out


class _Skip(Exception):
    """Leave the file as it is, and say why."""


# -- formats -------------------------------------------------------------------------------------------
class JsonFormat:
    name = "JSON"

    @staticmethod
    def parse(path: Path, raw: bytes | None) -> Any:
        if raw is None:
            return {}
        try:
            data = json.loads(raw.decode("utf-8") or "{}")
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidArgument(f"{path} is not valid JSON ({exc}); nothing was changed") from None
        if not isinstance(data, dict):
            raise InvalidArgument(f"{path} does not hold a JSON object; nothing was changed")
        return data

    @staticmethod
    def dump(data: Any, raw: bytes | None) -> bytes:
        """In the file's own layout where it has one (indent, final newline), else two spaces."""
        text = raw.decode("utf-8") if raw else ""
        indent: int | str | None = 2
        if text.strip():
            m = re.search(r"\n([ \t]+)\S", text)
            indent = (m.group(1) if "\t" in m.group(1) else len(m.group(1))) if m else None
        end = "\n" if (not text or text.endswith("\n")) else ""
        return (json.dumps(data, indent=indent, ensure_ascii=False) + end).encode("utf-8")

    @staticmethod
    def empty(data: Any) -> bool:
        return not data


class TomlFormat:
    """Codex's ``config.toml``; tomlkit keeps the person's comments and layout."""

    name = "TOML"

    @staticmethod
    def parse(path: Path, raw: bytes | None) -> Any:
        import tomlkit

        try:
            return tomlkit.parse(raw.decode("utf-8")) if raw else tomlkit.document()
        except Exception as exc:  # noqa: BLE001 - tomlkit raises several types; each means the file is not TOML
            raise InvalidArgument(f"{path} is not valid TOML ({exc}); nothing was changed") from None

    @staticmethod
    def dump(doc: Any, raw: bytes | None) -> bytes:
        import tomlkit

        return tomlkit.dumps(doc).encode("utf-8")

    @staticmethod
    def empty(doc: Any) -> bool:
        return not doc.unwrap()


Format = type[JsonFormat] | type[TomlFormat]
Edit = Callable[[Any, snapshots.Snapshot | None], list[str]]


def _change(t: Target, path: Path, fmt: Format, add: Edit, strip: Edit) -> Change:
    """Install into one file: ``add`` edits the parsed file and says what it did."""
    raw = snapshots.read_bytes(path)
    data = fmt.parse(path, raw)
    had_ours = bool(strip(fmt.parse(path, raw), None))
    snap = snapshots.begin(path, raw, had_ours)
    try:
        what = add(data, snap)
    except _Skip as why:
        return Change(str(path), "skipped", note=str(why))
    if not what:
        return Change(str(path), "unchanged")
    new = fmt.dump(data, raw)
    if new == raw:
        return Change(str(path), "unchanged")
    if raw is None:
        snap.dirs = snapshots.make_parents(path) + snap.dirs
    snapshots.write_atomic(path, new)
    if t.owner not in snap.extra.setdefault("owners", []):
        snap.extra["owners"].append(t.owner)
    snapshots.save(snap, new)
    return Change(str(path), "created" if raw is None else "updated", what)


def _revert(t: Target, path: Path, fmt: Format, strip: Edit, folders: list[str]) -> Change:
    """Uninstall from one file: its old bytes while it is as install left it and no other install
    shares it, else only our entries out (``strip``)."""
    raw = snapshots.read_bytes(path)
    snap = snapshots.load(path)
    owners = list(snap.extra.get("owners", [])) if snap else []
    others = [o for o in owners if o != t.owner]
    if raw is None:
        if snap is not None and not others:
            snapshots.drop(path)
        return Change(str(path), "unchanged")
    if snap is not None and snap.known and snap.matches(raw) and not others:
        snapshots.drop(path)
        if snap.before is None:
            path.unlink()
            folders += snap.dirs
            return Change(str(path), "removed", ["the file install created"])
        snapshots.write_atomic(path, snap.before)
        return Change(str(path), "restored", ["the content before install, byte for byte"])
    data = fmt.parse(path, raw)
    what = strip(data, snap)
    if snap is not None:
        snap.extra["owners"] = others
    created = snap is None or snap.before is None
    if what and fmt.empty(data) and created and not others:
        path.unlink()
        if snap is not None:
            folders += snap.dirs
        action, now = "removed", None
    elif what:
        now = fmt.dump(data, raw)
        snapshots.write_atomic(path, now)
        action = "updated"
    else:
        action, now = "unchanged", raw
    if snap is not None:
        if others:  # another install still has entries here: its snapshot lives on
            snapshots.save(snap, now)
        else:
            snapshots.drop(path)
    return Change(str(path), action, what)


# -- hooks (the same shape in Claude Code settings and Codex hooks.json) --------------------------------
def _add_hooks(t: Target, data: dict[str, Any], path: Path) -> list[str]:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument(f"{path}: 'hooks' is not an object; nothing was changed")
    what: list[str] = []
    for event in (*HOSTS[t.host].events, *HOSTS[t.host].observes):
        want = t.handler(event)
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"{path}: hooks.{event} is not a list; nothing was changed")
        seen = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for h in list(handlers):
                if is_ours(h, t.host):
                    if seen:  # a duplicate of ours: one is enough
                        handlers.remove(h)
                        what.append(f"hook {event} (duplicate removed)")
                    elif h != want:
                        h.clear()
                        h.update(want)
                        what.append(f"hook {event} (updated)")
                    seen = True
        if not seen:
            groups.append(t.group(event))
            what.append(f"hook {event}")
    return what


def _strip_hooks(t: Target, data: dict[str, Any]) -> list[str]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    what: list[str] = []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        for group in list(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            ours = [h for h in handlers if is_ours(h, t.host)]
            if not ours:
                continue
            for h in ours:
                handlers.remove(h)
            what.append(f"hook {event}")
            if not handlers:
                groups.remove(group)
        if not groups and f"hook {event}" in what:
            del hooks[event]
    if not hooks and what:
        del data["hooks"]
    return what


def _add_to_list(data: dict[str, Any], keys: tuple[str, ...], item: str, path: Path) -> bool:
    """Append ``item`` to the list at ``keys`` (creating it); False when it was there already."""
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise InvalidArgument(f"{path}: {'.'.join(keys[:-1])} is not an object; nothing was changed")
    items = node.setdefault(keys[-1], [])
    if not isinstance(items, list):
        raise InvalidArgument(f"{path}: {'.'.join(keys)} is not a list; nothing was changed")
    if item in items:
        return False
    items.append(item)
    return True


def _drop_from_list(data: dict[str, Any], keys: tuple[str, ...], item: str) -> bool:
    chain = [data]
    for k in keys[:-1]:
        nxt = chain[-1].get(k)
        if not isinstance(nxt, dict):
            return False
        chain.append(nxt)
    items = chain[-1].get(keys[-1])
    if not isinstance(items, list) or item not in items:
        return False
    items.remove(item)
    if not items:  # take out the containers it leaves empty
        del chain[-1][keys[-1]]
        for parent, k in zip(reversed(chain[:-1]), reversed(keys[:-1]), strict=True):
            if parent[k]:
                break
            del parent[k]
    return True


def _claude_settings(t: Target, path: Path, hooks: bool) -> tuple[Edit, Edit]:
    """A settings file: our hooks (``hooks``); with an MCP server, the rule that permits calling its
    tools and, for the project's ``.mcp.json`` server, its approval (without which the TUI's "New MCP
    server found" dialog defaults to running without it). These two are shared entries: one install
    takes them out only when no other install needs them and they were not there before."""
    shared: list[tuple[tuple[str, ...], str, str]] = [(("permissions", "allow"), PERMISSION, "permission")]
    if t.scope == "project":
        shared.append((("enabledMcpjsonServers",), SERVER_NAME, "approval"))

    def add(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = _add_hooks(t, data, path) if hooks else []
        if t.server() is None or snap is None:
            return what
        needs: dict[str, list[str]] = snap.extra.setdefault("needs", {})
        preexisting: list[str] = snap.extra.setdefault("preexisting", [])
        for keys, item, label in shared:
            needed = any(label in v for v in needs.values())
            if _add_to_list(data, keys, item, path):
                what.append(f"{label} {item}")
            elif not needed and label not in preexisting:
                preexisting.append(label)  # the person had it already: never ours to take out
            mine = needs.setdefault(t.owner, [])
            if label not in mine:
                mine.append(label)
        return what

    def strip(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = _strip_hooks(t, data) if hooks else []
        if snap is None:
            return what
        needs: dict[str, list[str]] = snap.extra.get("needs", {})
        mine = needs.pop(t.owner, [])
        for keys, item, label in shared:
            if label not in mine or label in snap.extra.get("preexisting", []):
                continue
            if any(label in v for v in needs.values()):
                continue  # another install still needs it
            if _drop_from_list(data, keys, item):
                what.append(f"{label} {item}")
        return what

    return add, strip


def _claude_files(t: Target) -> list[tuple[Path, Format, tuple[Edit, Edit]]]:
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


def _servers_of(t: Target, data: dict[str, Any], create: bool) -> dict[str, Any] | None:
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


def _claude_mcp(t: Target) -> tuple[Edit, Edit]:
    def add(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        server = t.server()
        assert server is not None
        servers = _servers_of(t, data, create=True)
        assert servers is not None
        current = servers.get(SERVER_NAME)
        if current is not None and not is_our_server(current):
            raise _Skip(f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is")
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


def _codex_hooks(t: Target) -> tuple[Edit, Edit]:
    return (lambda data, snap: _add_hooks(t, data, t.hooks_path)), (lambda data, snap: _strip_hooks(t, data))


def _codex_mcp(t: Target) -> tuple[Edit, Edit]:
    def add(doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
        import tomlkit

        server = t.server()
        assert server is not None
        servers = doc.get("mcp_servers")
        current = servers.get(SERVER_NAME) if servers is not None else None
        plain = current.unwrap() if current is not None and hasattr(current, "unwrap") else current
        if plain is not None and not is_our_server(plain):
            raise _Skip(f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is")
        if isinstance(plain, dict) and {k: plain.get(k) for k in server} == server:
            return []
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        table = tomlkit.table()
        for k, v in server.items():
            table[k] = v
        servers[SERVER_NAME] = table
        return [f"mcp server {SERVER_NAME}" + (" (updated)" if plain is not None else "")]

    def strip(doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = _strip_trust(t, doc, snap) if t.scope == "user" else []
        servers = doc.get("mcp_servers")
        current = servers.get(SERVER_NAME) if servers is not None else None
        plain = current.unwrap() if current is not None and hasattr(current, "unwrap") else current
        if not is_our_server(plain):
            return what
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
        return [*what, f"mcp server {SERVER_NAME}"]

    return add, strip


# -- Codex hook trust (in the user's config.toml, written by Codex) ---------------------------------------
def _strip_trust(t: Target, doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
    """Take out the trust entries this install had Codex write: our hooks' ``hooks.state`` keys (as
    recorded, and only while they still hold the hash recorded) and a project trust it added."""
    if snap is None:
        return []
    what: list[str] = []
    recorded: dict[str, str] = snap.extra.get("trust", {}).pop(t.owner, {})
    hooks: Any = doc.get("hooks")
    states: Any = hooks.get("state") if hooks is not None and hasattr(hooks, "get") else None
    for key, value in recorded.items():
        entry = states.get(key) if states is not None else None
        if entry is not None and entry.get("trusted_hash") == value:
            del states[key]
            what.append(f"trust {key.rsplit(':', 3)[1]}")
    if states is not None and not states:
        del hooks["state"]
        if not hooks:
            del doc["hooks"]
    trusted_projects: list[str] = snap.extra.get("projects", [])
    if t.owner in trusted_projects:
        trusted_projects.remove(t.owner)
        projects = doc.get("projects")
        entry = projects.get(str(t.dir)) if projects is not None else None
        if entry is not None and entry.unwrap() == {"trust_level": "trusted"}:
            del projects[str(t.dir)]
            what.append(f"project trust {t.dir}")
            if not projects:
                del doc["projects"]
    return what


def _trust(t: Target) -> Change:
    """Have Codex trust our hooks (``codex app-server``), recording what it wrote for uninstall."""
    from .codex_trust import TrustError, codex_path, trust

    config = codex_user_config()
    codex = codex_path()
    if codex is None:
        return Change(
            str(config), "skipped", note="codex is not on PATH, so the hooks are not trusted yet. " + trust_step(t)
        )
    raw = snapshots.read_bytes(config)
    snap = snapshots.begin(config, raw, ours_already=False)
    try:
        report = trust(codex, t.dir, t.hooks_path, lambda c: is_our_hook(c, "codex"), project=t.scope == "project")
    except TrustError as exc:
        return Change(str(config), "failed", note=f"{exc}. {trust_step(t)}")
    if not report.trusted_now and not report.project_trusted_now:
        return Change(str(config), "unchanged", note=f"hooks already trusted (checked in {report.elapsed_ms:.0f} ms)")
    after = snapshots.read_bytes(config)
    if raw is None:
        snap.dirs = []
    trusted = snap.extra.setdefault("trust", {}).setdefault(t.owner, {})
    for h in report.ours:
        if h["key"] in report.trusted_now:
            trusted[h["key"]] = h["currentHash"]
    if report.project_trusted_now:
        snap.extra.setdefault("projects", []).append(t.owner)
    if t.owner not in snap.extra.setdefault("owners", []):
        snap.extra["owners"].append(t.owner)
    snapshots.save(snap, after)
    what = [f"trust {h['eventName']}" for h in report.ours if h["key"] in report.trusted_now]
    if report.project_trusted_now:
        what.insert(0, f"project trust {t.dir}")
    return Change(
        str(config),
        "trusted",
        what,
        note=f"through codex app-server, as the /hooks review does ({report.elapsed_ms:.0f} ms)",
    )


def _untrust(t: Target, folders: list[str]) -> Change | None:
    config = codex_user_config()
    if config == t.mcp_path:  # --user: the MCP step reverted the same file, trust included
        return None
    return _revert(t, config, TomlFormat, lambda doc, snap: _strip_trust(t, doc, snap), folders)


def codex_user_config() -> Path:
    return codex_dir() / "config.toml"


def trust_step(t: Target) -> str:
    """What a person does to trust the hooks by hand."""
    if t.scope == "project":
        start = f"run `codex` in {t.dir}, trust the folder when asked, then open /hooks"
    else:
        start = "run `codex`, open /hooks"
    return (
        f"Codex skips these hooks until they are trusted: {start} and trust the sessionwatch hooks "
        f"(SessionStart, UserPromptSubmit, PostToolUse); or, with codex on PATH, run `{fix_command(t)}`."
    )


def fix_command(t: Target, verb: str = "install") -> str:
    """The ``sessionwatch`` command line that (re)installs ``t``."""
    argv = ["sessionwatch", *t.global_args, verb, t.host, f"--{t.scope}"]
    if t.scope != "user":
        argv += ["--dir", str(t.dir)]
    if t.session and verb == "install":
        argv += ["--session", t.session]
    if t.agent and verb == "install":
        argv += ["--agent", t.agent]
    return shlex.join(argv)


# -- checks ---------------------------------------------------------------------------------------------
def check_options(t: Target) -> None:
    """Refuse what cannot be meant (InvalidArgument, nothing written)."""
    if t.host == "codex" and t.scope == "local":
        raise InvalidArgument(
            "Codex has no per-person project file: use --project (.codex/, committed) or --user (~/.codex)"
        )
    if t.host == "pi" and t.scope == "local":
        raise InvalidArgument(
            "Pi has no per-person project file: use --project (.pi/extensions/, committed) or --user "
            "(the agent dir's extensions/)"
        )
    if t.session is not None:
        parse_key(t.session, "--session")
    if t.scope == "user" and t.session is not None:
        raise InvalidArgument(
            "--user installs for every session on this machine, so --session would bind them all to one "
            "key. Bind a project with --project or --local --session KEY; for --user, each host session "
            "gets its own key from its host session id (agent:<folder>:claude:<id>, agent:<folder>:codex:<id>)"
        )
    if t.committed:
        _refuse_machine_paths(t.global_args)


def _refuse_machine_paths(global_args: list[str]) -> None:
    """The project scope's files are committed: a store file is a path of this machine, and a database
    password is a secret."""
    for flag, value in pairwise(global_args):
        if flag != "--store":
            continue
        from urllib.parse import urlsplit

        from ..store import POSTGRES_SCHEMES

        if not value.startswith(POSTGRES_SCHEMES):
            raise InvalidArgument(
                f"--store {value} is a file of this machine, and --project writes files a team commits: "
                "use --local (this person's files), or leave --store out and set SESSIONWATCH_STORE"
            )
        if urlsplit(value).password:
            raise InvalidArgument(
                "--store holds a password, and --project writes files a team commits: use --local, or "
                "leave --store out and set SESSIONWATCH_STORE"
            )


# -- entry points --------------------------------------------------------------------------------------
def target(
    host: str,
    scope: str = "project",
    directory: str | os.PathLike[str] | None = None,
    session: str | None = None,
    agent: str | None = None,
    global_args: list[str] | None = None,
) -> Target:
    if scope not in SCOPES:
        raise InvalidArgument(f"scope must be one of {', '.join(SCOPES)}")
    folder = Path(directory or os.getcwd()).resolve()
    if agent is None and session is None and scope != "user":
        # zero-config keys name the project's agent: its folder's name, fixed now, so a teammate's clone
        # in another folder (or a session started in a subfolder) is the same agent
        agent = agent_from_folder(str(folder))
    return Target(host, scope, folder, session, agent, list(global_args or []))


def _pi_install(t: Target) -> list[Change]:
    from ..hosts.pi import install as pi

    action, note = pi.write(t.hooks_path, pi.render(shlex.split(t.hook_command())))
    what = ["the extension: notices into the next model call, who sent each prompt, the lifecycle"]
    return [Change(str(t.hooks_path), action, what if action in ("created", "updated") else [], note)]


def _pi_uninstall(t: Target) -> list[Change]:
    from ..hosts.pi import install as pi

    action, note = pi.remove(t.hooks_path, t.scope)
    return [Change(str(t.hooks_path), action, ["the extension"] if action == "removed" else [], note)]


def install(t: Target, *, trust: bool = True) -> list[Change]:
    check_options(t)
    if t.host == "pi":
        return _pi_install(t)
    if t.host == "claude-code":
        files = _claude_files(t) if t.server() is not None else _claude_files(t)[:1]
        changes = [_change(t, path, fmt, *edits) for path, fmt, edits in files]
    else:
        changes = [_change(t, t.hooks_path, JsonFormat, *_codex_hooks(t))]
        if t.server() is not None:
            changes.append(_change(t, t.mcp_path, TomlFormat, *_codex_mcp(t)))
        if trust:
            changes.append(_trust(t))
        else:
            changes.append(Change(str(codex_user_config()), "skipped", note="--no-trust. " + trust_step(t)))
    if t.server() is None:
        changes.append(
            Change(
                str(t.mcp_path),
                "skipped",
                note="no MCP server registered: Codex does not tell its MCP servers which session they serve, "
                "so the server needs one key: give --session KEY to register it"
                + (" (with --project)" if t.scope == "user" else ""),
            )
        )
    return changes


def uninstall(t: Target) -> list[Change]:
    if t.host in ("codex", "pi") and t.scope == "local":
        check_options(t)
    if t.host == "pi":
        return _pi_uninstall(t)
    folders: list[str] = []  # created by install: removed at the end, when all their files are gone
    if t.host == "claude-code":
        changes = [_revert(t, path, fmt, edits[1], folders) for path, fmt, edits in _claude_files(t)]
    else:
        changes = [
            _revert(t, t.hooks_path, JsonFormat, _codex_hooks(t)[1], folders),
            _revert(t, t.mcp_path, TomlFormat, _codex_mcp(t)[1], folders),
        ]
        untrust = _untrust(t, folders)
        if untrust is not None:
            changes.append(untrust)
    for folder in sorted(set(folders), key=len, reverse=True):  # deepest first
        snapshots.remove_empty([folder])
    return changes
