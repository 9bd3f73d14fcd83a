"""``sessionwatch install|uninstall opencode``: the plugin file, and its entries in OpenCode's config.

==============  ===============================================  ================================================
scope           the plugin                                       its entries (``plugin``, ``mcp``, ``permission``)
==============  ===============================================  ================================================
``--project``   ``<dir>/.sessionwatch/opencode-plugin.js``       ``<dir>/opencode.json``: ``./.sessionwatch/...``
``--user``      ``<config>/opencode/sessionwatch/plugin.js``     ``<config>/opencode/opencode.json`` (absolute)
==============  ===============================================  ================================================

(``<config>`` = ``$XDG_CONFIG_HOME``, else ``~/.config``.) Not in ``.opencode/plugins/``, where OpenCode
would load it too: a ``.opencode`` folder makes OpenCode npm-install its plugin package there on the next
start (tens of seconds), and this plugin needs no package. The entry is relative in a project (the files
are meant to be committed: no path of this machine, the command is ``sessionwatch`` from PATH); the user
scope names this installation's absolute command. OpenCode merges ``opencode.json`` with an
``opencode.jsonc`` next to it, so a person's ``.jsonc`` is never touched.

Beside the plugin the config gets the tools: the MCP server ``sessionwatch`` (``sessionwatch mcp``, started
by OpenCode for all the sessions of its process; the plugin names the session in each call, see
``mcpserver/routing.py``), and the permission rule ``sessionwatch_*: allow`` (OpenCode names a server's tools
``<server>_<tool>``), so a config that asks before every tool (``"*": "ask"``, which ``opencode run``
answers with a refusal) still lets the model reconcile. A rule the person wrote for ``sessionwatch_*`` is
theirs: left as it is.

The plugin file is ours when it holds the settings marker; the entries are ours when they name our file
or our command. Installing twice changes nothing. The config goes through the installer kit
(``hosts/installer.py``): uninstall gives its bytes back exactly while it is as install left it, and
otherwise takes out exactly our entries (and an ``opencode.json`` left holding only what install put
there).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument
from .. import install_state as snapshots
from ..installer import (
    SERVER_NAME,
    Change,
    Edit,
    JsonFormat,
    Skip,
    Target,
    install_file,
    is_our_server as kit_is_our_server,
    revert_file,
)
from .room import HOOK, SERVER_ENV

MARKER = "// sessionwatch:settings"
SCHEMA = "https://opencode.ai/config.json"
PROJECT_PLUGIN = Path(".sessionwatch") / "opencode-plugin.js"
SCOPES = ("project", "user")
PERMISSION = f"{SERVER_NAME}_*"  # OpenCode names a server's tools <server>_<tool>, and asks about each by that name
# How long OpenCode waits for one answer of the server: a sessions_send may wait up to 600 s for its reply
# (OpenCode's default, 5 s, would cut it off). The server answers OpenCode's handshake at once.
SERVER_TIMEOUT_MS = 605_000


def config_home() -> Path:
    env = os.environ.get("XDG_CONFIG_HOME")
    return (Path(env) if env else Path.home() / ".config") / "opencode"


@dataclass
class Layout:
    scope: str
    dir: Path

    @property
    def plugin_path(self) -> Path:
        return self.dir / PROJECT_PLUGIN if self.scope == "project" else config_home() / "sessionwatch" / "plugin.js"

    @property
    def config_path(self) -> Path:
        return self.dir / "opencode.json" if self.scope == "project" else config_home() / "opencode.json"

    @property
    def entry(self) -> str:
        """How the config names the plugin (OpenCode resolves ``./`` against the config file's folder)."""
        return "./" + PROJECT_PLUGIN.as_posix() if self.scope == "project" else str(self.plugin_path)


def layout(scope: str, directory: str | os.PathLike[str] | None) -> Layout:
    if scope not in SCOPES:
        raise InvalidArgument(
            "OpenCode has no per-person project file: use --project (opencode.json, committed) or --user"
        )
    return Layout(scope, Path(directory or os.getcwd()).resolve())


def plugin_source(command: list[str], global_args: list[str], hook_args: list[str]) -> str:
    """The plugin as install writes it: the packaged file with this install's settings line."""
    text = resources.files(__package__).joinpath("plugin.js").read_text(encoding="utf-8")
    settings = json.dumps({"command": command, "globalArgs": global_args, "hookArgs": hook_args})
    out = []
    for line in text.splitlines(keepends=True):
        out.append(f"const SETTINGS = {settings}; {MARKER}\n" if line.rstrip().endswith(MARKER) else line)
    return "".join(out)


def settings_of(text: str) -> dict[str, Any] | None:
    """The settings an installed plugin file holds, or None when it is not ours."""
    for line in text.splitlines():
        if line.rstrip().endswith(MARKER) and line.startswith("const SETTINGS = "):
            raw = line[len("const SETTINGS = ") :].rstrip()[: -len(MARKER)].rstrip().rstrip(";")
            try:
                value = json.loads(raw)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _read_config(path: Path) -> tuple[dict[str, Any] | None, bytes | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    data: dict[str, Any] = JsonFormat.parse(path, raw)  # a broken file: InvalidArgument, nothing changed
    return data, raw


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def is_our_entry(entry: object, lay: Layout) -> bool:
    name = entry if isinstance(entry, str) else entry[0] if isinstance(entry, list) and entry else None
    if not isinstance(name, str):
        return False
    if name == lay.entry:
        return True
    return name.endswith(("/.sessionwatch/opencode-plugin.js", "/opencode/sessionwatch/plugin.js"))


def is_our_server(entry: object) -> bool:
    """An ``mcp`` entry running ``sessionwatch ... mcp`` (OpenCode's command is one list)."""
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        return False
    return kit_is_our_server({"command": command[0], "args": command[1:]})


def server_entry(command: list[str], global_args: list[str], hook_args: list[str]) -> dict[str, Any]:
    """Our MCP server as OpenCode's config holds it: the plugin's own command line with ``mcp`` for ``hook
    opencode`` (so the same store or gateway, session and agent), told that OpenCode starts it."""
    return {
        "type": "local",
        "command": [*command, *global_args, "mcp", *hook_args],
        "environment": dict(SERVER_ENV),
        "enabled": True,
        "timeout": SERVER_TIMEOUT_MS,
    }


def found_entry(lay: Layout) -> bool:
    """Whether the config lists our plugin (a config that cannot be read: no)."""
    return any(is_our_entry(p, lay) for p in _plugins(_config_or_none(lay)))


def found_server(lay: Layout) -> dict[str, Any] | None:
    """Our MCP server entry in the config, or None."""
    servers = (_config_or_none(lay) or {}).get("mcp")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return dict(entry) if isinstance(entry, dict) and is_our_server(entry) else None


def permission_rules(data: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """``(permission, pattern, action)`` in the order OpenCode reads them from a config's ``permission``."""
    perm = (data or {}).get("permission")
    if isinstance(perm, str):
        return [("*", "*", perm)]
    out: list[tuple[str, str, str]] = []
    for name, rule in perm.items() if isinstance(perm, dict) else ():
        if isinstance(rule, str):
            out.append((name, "*", rule))
        elif isinstance(rule, dict):
            out += [(name, pattern, action) for pattern, action in rule.items() if isinstance(action, str)]
    return out


def _config_or_none(lay: Layout) -> dict[str, Any] | None:
    try:
        return _read_config(lay.config_path)[0]
    except InvalidArgument:
        return None


def _plugins(data: dict[str, Any] | None) -> list[Any]:
    plugins = (data or {}).get("plugin")
    return plugins if isinstance(plugins, list) else []


class _Owner(Target):
    """The kit's install target, for the owner name of the config's snapshot (OpenCode's own checks are
    ``installer.py``'s, not the kit's)."""

    adapter = HOOK


def _owner(lay: Layout) -> Target:
    return _Owner(HOOK.name, lay.scope, lay.dir)


def _check_shapes(path: Path, data: dict[str, Any] | None) -> None:
    """Refuse a config whose entries install would have to replace (nothing is written then)."""
    for key, kinds, what in (("plugin", (list,), "a list"), ("mcp", (dict,), "an object")):
        if key in (data or {}) and not isinstance((data or {})[key], kinds):
            raise InvalidArgument(f"{path}: {key!r} is not {what}; nothing was changed")
    perm = (data or {}).get("permission", {})
    if not isinstance(perm, (dict, str)):
        raise InvalidArgument(f"{path}: 'permission' is neither an action nor an object; nothing was changed")


def config_edits(lay: Layout, server: dict[str, Any]) -> tuple[Edit, Edit]:
    """Add and take out our entries: the plugin, the MCP server and its permission rule."""

    def add(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        _check_shapes(lay.config_path, data)
        what: list[str] = []
        if not data:
            data["$schema"] = SCHEMA
        plugins = data.setdefault("plugin", [])
        if [p for p in plugins if is_our_entry(p, lay)] != [lay.entry]:
            plugins[:] = [p for p in plugins if not is_our_entry(p, lay)] + [lay.entry]
            what.append(f"plugin {lay.entry}")
        servers = data.setdefault("mcp", {})
        current = servers.get(SERVER_NAME)
        if current is not None and not is_our_server(current):
            raise Skip(f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is")
        if current != server:
            servers[SERVER_NAME] = server
            what.append(f"mcp server {SERVER_NAME}" + (" (updated)" if current else ""))
        mine: dict[str, Any] = snap.extra.setdefault("opencode", {}) if snap is not None else {}
        perm = data.get("permission")
        if isinstance(perm, str):  # one action for every tool: the same rules as {"*": action}
            data["permission"] = {"*": perm, PERMISSION: "allow"}
            mine.update(permission=True, permission_was=perm)
            what.append(f"permission {PERMISSION}: allow")
        elif perm is None or PERMISSION not in perm:
            data.setdefault("permission", {})[PERMISSION] = "allow"
            mine["permission"] = True
            what.append(f"permission {PERMISSION}: allow")
        # else: a rule for our tools is there already (the person's, or ours from an earlier install)
        return what

    def strip(data: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what: list[str] = []
        plugins = data.get("plugin")
        if isinstance(plugins, list) and any(is_our_entry(p, lay) for p in plugins):
            plugins[:] = [p for p in plugins if not is_our_entry(p, lay)]
            if not plugins:
                del data["plugin"]
            what.append(f"plugin {lay.entry}")
        servers = data.get("mcp")
        if isinstance(servers, dict) and is_our_server(servers.get(SERVER_NAME)):
            del servers[SERVER_NAME]
            if not servers:
                del data["mcp"]
            what.append(f"mcp server {SERVER_NAME}")
        mine = snap.extra.get("opencode", {}) if snap is not None else {}
        perm = data.get("permission")
        if mine.get("permission") and isinstance(perm, dict) and PERMISSION in perm:  # only a rule we wrote
            del perm[PERMISSION]
            was = mine.get("permission_was")
            if isinstance(was, str) and perm == {"*": was}:
                data["permission"] = was
            elif not perm:
                del data["permission"]
            what.append(f"permission {PERMISSION}")
        if what and snap is not None and snap.before is None and data == {"$schema": SCHEMA}:
            data.clear()  # all that is left is what install put into the file it created
        return what

    return add, strip


def install(lay: Layout, command: list[str], global_args: list[str], hook_args: list[str]) -> list[Change]:
    changes: list[Change] = []
    data, _ = _read_config(lay.config_path)  # refuse a broken config before writing anything
    _check_shapes(lay.config_path, data)
    source = plugin_source(command, global_args, hook_args).encode("utf-8")
    try:
        old = lay.plugin_path.read_bytes()
    except FileNotFoundError:
        old = None
    if old == source:
        changes.append(Change(str(lay.plugin_path), "unchanged"))
    else:
        _write_atomic(lay.plugin_path, source)
        changes.append(Change(str(lay.plugin_path), "created" if old is None else "updated", ["the plugin"]))
    edits = config_edits(lay, server_entry(command, global_args, hook_args))
    changes.append(install_file(_owner(lay), lay.config_path, JsonFormat, *edits))
    return changes


def uninstall(lay: Layout) -> list[Change]:
    folders: list[str] = []
    changes = [revert_file(_owner(lay), lay.config_path, JsonFormat, config_edits(lay, {})[1], folders)]
    snapshots.remove_folders(folders)
    try:
        text = lay.plugin_path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        text = None
    if text is not None and settings_of(text) is not None:
        lay.plugin_path.unlink()
        try:
            lay.plugin_path.parent.rmdir()  # the folder install made for it, when nothing else is in it
        except OSError:
            pass
        changes.append(Change(str(lay.plugin_path), "removed", ["the plugin"]))
    elif text is not None:
        changes.append(Change(str(lay.plugin_path), "skipped", note="not sessionwatch's plugin: left as it is"))
    else:
        changes.append(Change(str(lay.plugin_path), "unchanged"))
    return changes
