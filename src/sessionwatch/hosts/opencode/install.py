"""``sessionwatch install|uninstall opencode``: the plugin file, and its entry in OpenCode's config.

==============  ===============================================  ================================================
scope           the plugin                                       its entry (``plugin`` list)
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

The plugin file is ours when it holds the settings marker; the entry is ours when it names our file.
Installing twice changes nothing; uninstall takes out exactly the entry and the file (and an
``opencode.json`` left holding only what install put there).
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
from ..installer import Change

MARKER = "// sessionwatch:settings"
SCHEMA = "https://opencode.ai/config.json"
PROJECT_PLUGIN = Path(".sessionwatch") / "opencode-plugin.js"
SCOPES = ("project", "user")


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
    try:
        data = json.loads(raw.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object; nothing was changed")
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


def _dump(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def is_our_entry(entry: object, lay: Layout) -> bool:
    name = entry if isinstance(entry, str) else entry[0] if isinstance(entry, list) and entry else None
    if not isinstance(name, str):
        return False
    if name == lay.entry:
        return True
    return name.endswith(("/.sessionwatch/opencode-plugin.js", "/opencode/sessionwatch/plugin.js"))


def found_entry(lay: Layout) -> bool:
    """Whether the config lists our plugin (a config that cannot be read: no)."""
    try:
        data, _ = _read_config(lay.config_path)
    except InvalidArgument:
        return False
    plugins = (data or {}).get("plugin")
    return isinstance(plugins, list) and any(is_our_entry(p, lay) for p in plugins)


def install(lay: Layout, command: list[str], global_args: list[str], hook_args: list[str]) -> list[Change]:
    changes: list[Change] = []
    data, raw = _read_config(lay.config_path)  # refuse a broken config before writing anything
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
    config: dict[str, Any] = {"$schema": SCHEMA} if data is None else data
    plugins = config.get("plugin")
    if plugins is None:
        plugins = config["plugin"] = []
    if not isinstance(plugins, list):
        raise InvalidArgument(f"{lay.config_path}: 'plugin' is not a list; the plugin file was written, not listed")
    what: list[str] = []
    ours = [p for p in plugins if is_our_entry(p, lay)]
    if ours != [lay.entry]:
        plugins[:] = [p for p in plugins if not is_our_entry(p, lay)] + [lay.entry]
        what.append(f"plugin {lay.entry}")
    if not what:
        changes.append(Change(str(lay.config_path), "unchanged"))
    else:
        _write_atomic(lay.config_path, _dump(config))
        changes.append(Change(str(lay.config_path), "created" if raw is None else "updated", what))
    return changes


def uninstall(lay: Layout) -> list[Change]:
    changes: list[Change] = []
    data, _ = _read_config(lay.config_path)
    if data is None:
        changes.append(Change(str(lay.config_path), "unchanged"))
    else:
        plugins = data.get("plugin")
        if isinstance(plugins, list) and any(is_our_entry(p, lay) for p in plugins):
            plugins[:] = [p for p in plugins if not is_our_entry(p, lay)]
            if not plugins:
                del data["plugin"]
            if not data or data == {"$schema": SCHEMA}:  # nothing left but what install wrote
                lay.config_path.unlink()
                changes.append(Change(str(lay.config_path), "removed", ["the file install created"]))
            else:
                _write_atomic(lay.config_path, _dump(data))
                changes.append(Change(str(lay.config_path), "updated", [f"plugin {lay.entry} (removed)"]))
        else:
            changes.append(Change(str(lay.config_path), "unchanged"))
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
