"""The file ``sessionwatch install pi`` writes: the extension, with the hook command and the tools in it.

Pi loads every ``*.ts`` in ``<project>/.pi/extensions/`` (``--project``, meant to be committed: the command
is ``sessionwatch`` from PATH, no path of this machine) and in ``<agent dir>/extensions/`` (``--user``:
this installation's absolute command), without asking. The file is sessionwatch's own: install writes it
whole (and changes nothing when it is already what it would write), uninstall deletes it, and then its
``extensions`` folder and (project) the ``.pi`` folder when they are left empty (an empty folder holds
nothing anyone loses). A file of that name that is not ours is never touched.

The tools (``tools.json``, package data: the engine's six, as the MCP server publishes them; a test keeps
them so) go into the file too, so Pi lists them from its first model request without asking sessionwatch
anything at start-up.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from .sessions import agent_dir

FILE_NAME = "sessionwatch.ts"
PLACEHOLDER = "__SESSIONWATCH_COMMAND__"
TOOLS_PLACEHOLDER = "__SESSIONWATCH_TOOLS__"
FIRST_LINE = "// sessionwatch for Pi:"
_COMMAND_LINE = "const COMMAND: string[] = "


def extension_path(scope: str, directory: Path) -> Path:
    if scope == "user":
        return agent_dir() / "extensions" / FILE_NAME
    return directory / ".pi" / "extensions" / FILE_NAME


def template() -> str:
    return resources.files(__package__ or "sessionwatch.hosts.pi").joinpath(FILE_NAME).read_text(encoding="utf-8")


def tools() -> list[dict[str, object]]:
    """The tools the extension registers: name, label, description and parameters (a JSON Schema)."""
    data = resources.files(__package__ or "sessionwatch.hosts.pi").joinpath("tools.json").read_text(encoding="utf-8")
    return list(json.loads(data))


def render(command: list[str]) -> str:
    """The extension running ``command`` (argv of ``sessionwatch ... hook pi ...``)."""
    text = template().replace(PLACEHOLDER, json.dumps(command, ensure_ascii=False), 1)
    return text.replace(TOOLS_PLACEHOLDER, json.dumps(tools(), ensure_ascii=False), 1)


def is_ours(text: str) -> bool:
    return text.startswith(FIRST_LINE)


def command_of(text: str) -> list[str] | None:
    """The hook command an installed extension runs, or None when the file is not ours or unreadable."""
    if not is_ours(text):
        return None
    for line in text.splitlines():
        if line.startswith(_COMMAND_LINE):
            try:
                value = json.loads(line[len(_COMMAND_LINE) :].rstrip().rstrip(";"))
            except ValueError:
                return None
            if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
                return value
            return None
    return None


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""  # there, but not a file of ours


def write(path: Path, text: str) -> tuple[str, str | None]:
    """Put the extension in place: (action, note); action is created, updated, unchanged or skipped."""
    current = read(path)
    if current == text:
        return "unchanged", None
    if current is not None and not is_ours(current):
        return "skipped", f"{path} exists and is not sessionwatch's: left as it is (move it away to install)"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return ("created" if current is None else "updated"), None


def remove(path: Path, scope: str = "project") -> tuple[str, str | None]:
    """Take the extension out: (action, note); action is removed, unchanged (none there) or skipped."""
    current = read(path)
    if current is None:
        return "unchanged", None
    if not is_ours(current):
        return "skipped", f"{path} is not sessionwatch's: left as it is"
    path.unlink()
    for folder in (path.parent, path.parent.parent) if scope == "project" else (path.parent,):
        try:
            os.rmdir(folder)  # only an empty one
        except OSError:
            break
    return "removed", None
