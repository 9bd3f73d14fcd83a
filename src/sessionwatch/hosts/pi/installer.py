"""``sessionwatch install|uninstall|doctor pi``: the extension (``install.py``) as a room configured through
files (the kit: ``hosts/installer.py``; the checks: ``hosts/checks.py``). Pi has no MCP: the extension is all
there is, with the hook command in it.
"""

from __future__ import annotations

import shlex
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
        what = ["the extension: notices into the next model call, who sent each prompt, the lifecycle"]
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


INSTALLER = FileInstaller(PiTarget, PROGRAM)
