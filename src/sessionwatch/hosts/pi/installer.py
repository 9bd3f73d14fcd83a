"""``sessionwatch install|uninstall|doctor pi``: the extension (``install.py``) as a room configured through
files (the kit: ``hosts/installer.py``; the checks: ``hosts/checks.py``). Pi has no MCP: the extension is all
there is, with the hook command and the tools in it (each call runs ``sessionwatch tool NAME --host pi``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import USER_PROMPT_SUBMIT
from ..checks import Check, FileInstaller, Found
from ..installer import Change, Target, fix_command
from . import install as pi
from .room import HOOK, PROGRAM


@dataclass
class PiTarget(Target):
    adapter = HOOK
    no_local = (
        "Pi has no per-person project file: use --project (.pi/extensions/, committed) or --user "
        "(the agent dir's extensions/)"
    )
    has_mcp = False

    @property
    def hooks_path(self) -> Path:
        """The extension, with the hook command in it."""
        return pi.extension_path(self.scope, self.dir)

    @property
    def mcp_path(self) -> Path:
        return self.hooks_path  # no MCP server: nothing else is written

    def install(self, *, trust: bool = True) -> list[Change]:
        action, note = pi.write(self.hooks_path, pi.render(shlex.split(self.hook_command())))
        what = ["the extension: notices into the next model call, the tools, who sent each prompt, the lifecycle"]
        return [Change(str(self.hooks_path), action, what if action in ("created", "updated") else [], note)]

    def uninstall(self) -> list[Change]:
        action, note = pi.remove(self.hooks_path, self.scope)
        return [Change(str(self.hooks_path), action, ["the extension"] if action == "removed" else [], note)]

    # -- doctor --
    def find(self) -> Found:
        """The extension: ours, its hook command, and whether it is the one this version writes."""
        text = pi.read(self.hooks_path)
        if text is None:
            return Found({}, None, [], {})
        command = pi.command_of(text)
        if command is None:
            path = self.hooks_path
            return Found(
                {}, None, [Check("files", False, f"{path} is not sessionwatch's extension", f"move {path} away")]
            )
        problems = []
        if text != pi.render(command):
            problems.append(
                Check(
                    "files",
                    False,
                    f"{self.hooks_path} is not the extension this sessionwatch writes",
                    fix_command(self),
                )
            )
        return Found(dict.fromkeys(self.events(), shlex.join(command)), None, problems, {})

    def command_checks(self, found: Found) -> list[Check]:
        """The tools: the extension registers the six, and the command it runs for a call has them."""
        text = pi.read(self.hooks_path) or ""
        command = pi.command_of(text)
        if command is None:
            return []
        registered = _registered(text)
        wanted = [t["name"] for t in pi.tools()]
        if registered != wanted:
            return [Check("tools", False, f"{self.hooks_path} registers {registered or 'no tools'}", fix_command(self))]
        exe = command[0] if os.sep in command[0] else shutil.which(command[0])
        if exe is None:
            return []  # the command check says it is missing
        at = command.index("hook")
        argv = [exe, *command[1:at], "tool", "--help"]
        try:
            ran = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [Check("tools", False, f"`{shlex.join(argv)}` does not run: {exc}", fix_command(self))]
        if ran.returncode != 0:
            detail = f"{exe} has no `tool` command (older than the extension): every tool call fails"
            return [Check("tools", False, detail, "install this sessionwatch where Pi runs, then " + fix_command(self))]
        return [Check("tools", True, f"{len(wanted)} tools registered; each call runs `{command[0]} ... tool NAME`")]

    def sample_payload(self, event: str) -> dict[str, Any]:
        """What the extension sends (no prompt text: a sample must not be recorded as one)."""
        base: dict[str, Any] = {
            "session_id": "sessionwatch-verify",
            "transcript_path": None,
            "cwd": str(self.dir),
            "hook_event_name": event,
        }
        if event == USER_PROMPT_SUBMIT:
            base.update(prompt_source="rpc", has_ui=False)
        return base


def _registered(text: str) -> list[str]:
    """The names of the tools an installed extension registers."""
    for line in text.splitlines():
        if line.startswith("const TOOLS: ToolSpec[] = "):
            try:
                specs = json.loads(line.split(" = ", 1)[1].rstrip().rstrip(";"))
            except ValueError:
                return []
            return [str(t.get("name")) for t in specs if isinstance(t, dict)] if isinstance(specs, list) else []
    return []


INSTALLER = FileInstaller(PiTarget, PROGRAM)
