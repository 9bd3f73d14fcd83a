"""Pi's room (npm ``@mariozechner/pi-coding-agent``): its session files and its extension.

- ``sessions``: where Pi keeps one JSONL file per session, listing and finding one by id or folder.
- ``reader``: a file read from a cursor; which new entries are a person's (the conservative rule that
  needs no extension). ``catalog``: both, as the monitor's reader.
- ``sessionwatch.ts`` (package data) and ``install``: the extension ``sessionwatch install pi`` writes,
  which delivers notices into the next model call, tells who sent each prompt, and reports the lifecycle;
  ``installer``: install, uninstall and the checks.
"""

from __future__ import annotations

from ..base import POST_TOOL_USE, SESSION_END, SESSION_START, STOP, USER_PROMPT_SUBMIT, HookAdapter, Room

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from ..installer import Installer
    from ..readers import SessionReader


def _installer() -> Installer:
    from .installer import INSTALLER

    return INSTALLER


def _reader() -> SessionReader:
    from .catalog import PiReader

    return PiReader()


# The extension runs the hook; the answers reach the model: a prompt's in its first call's system prompt,
# PostToolUse's (every later call of the run: after a tool, a steered turn) as that call's last message.
# The rest is lifecycle. It says who sent each prompt, so a prompt needs no nudge.
ROOM = Room(
    HookAdapter("pi", "pi", (USER_PROMPT_SUBMIT, POST_TOOL_USE), (SESSION_START, STOP, SESSION_END), tells_sender=True),
    label="Pi",
    program="pi",
    scopes=("project", "user"),
    installer=_installer,
    reader=_reader,
    gateway_route=False,
)
