"""The one small interface of a host room: what the monitor, the hook command and ``install`` ask of a host.

A room is a :class:`Room`: its names, its hook adapter (:class:`HookAdapter`: the events it answers and
observes, and the shape of an answer on the host's stdout), its installer and its reader. The installer and
the reader are loaded on first use, so reading a room's card (what the hook's quick path does) imports
nothing but this module.

- ``installer()``: an :class:`~sessionwatch.hosts.installer.Installer`, ``install``/``uninstall``/``diagnose``/
  ``verify`` for a scope and folder (``sessionwatch install|uninstall|doctor HOST``).
- ``reader()``: how the monitor reads the host's sessions, one of two shapes. A room whose host writes JSONL
  transcripts gives :class:`~sessionwatch.hosts.transcripts.TranscriptFiles` (where the files are, which
  rows are a person's), and ``upstream`` does the reading (the byte-offset scan, a paired node's items); a
  room with its own store gives a :class:`~sessionwatch.hosts.readers.SessionReader` (adopt, list, read
  from a marker), which ``upstream/rooms.py`` turns into the monitor's provider.

Standard library only, no ``typing`` at run time: the hook's quick path reads the registry before anything
else loads.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run

if TYPE_CHECKING:
    from collections.abc import Callable

    from .install_api import Installer
    from .push import Channel
    from .readers import SessionReader
    from .transcripts import TranscriptFiles

SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
SUBAGENT_START = "SubagentStart"
SUBAGENT_STOP = "SubagentStop"
PERMISSION_REQUEST = "PermissionRequest"
NOTIFICATION = "Notification"  # Claude Code only (Codex ignores the name)
SESSION_END = "SessionEnd"

ANSWERED = (SESSION_START, USER_PROMPT_SUBMIT, POST_TOOL_USE, STOP)  # what Claude Code and Codex ask us
OBSERVED = (SUBAGENT_START, SUBAGENT_STOP, PERMISSION_REQUEST, SESSION_END)  # lifecycle (host_sessions)


class HookAdapter:  # a plain class: a dataclass's or NamedTuple's import is a noticeable part of a hook run
    """How ``sessionwatch hook HOST`` talks with the host.

    ``events``: the events answered (pending notices go to the model); ``observes``: the events only written
    down (lifecycle, subagents). ``tells_sender``: the host's side says who sent each prompt (Pi's
    extension): the hook writes it down, and a prompt needs no nudge of the monitor to be found.
    ``end_events``/``subagent_ends``: a parent's events that say how a subagent ended (a failed one gets no
    ``SubagentStop``). ``daemon_push``: the hook writes down where the session runs (its room's push
    channel, ``register``), so its MCP server can push through the host's daemon (Codex's TUI;
    ``hosts/codex/push.py``). The answer is the JSON both Claude Code and Codex read from stdout on exit 0
    (``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``; on Stop ``{"decision": "block",
    "reason"}``: the turn goes on with the reason as the model's next input); a room's plugin or extension
    reads the same.
    """

    __slots__ = ("_ends", "catalog", "daemon_push", "end_events", "events", "name", "observes", "tells_sender")

    def __init__(
        self,
        name: str,
        catalog: str,
        events: tuple[str, ...],
        observes: tuple[str, ...] = (),
        *,
        tells_sender: bool = False,
        daemon_push: bool = False,
        end_events: tuple[str, ...] = (),
        ends: Callable[[], Callable[[str, dict[str, object]], list[tuple[str, str]]]] | None = None,
    ) -> None:
        self.name = name  # as on the command line
        self.catalog = catalog  # the upstream catalog its sessions are listed in (and the keys' middle part)
        self.events = events
        self.observes = observes
        self.tells_sender = tells_sender
        self.daemon_push = daemon_push
        self.end_events = end_events  # the parent's events that may say a subagent ended (``subagent_ends``)
        self._ends = ends

    def subagent_ends(self, event: str, data: dict[str, object]) -> list[tuple[str, str]]:
        """``[(host agent id, outcome)]`` of the subagents this event of their parent says ended, beyond
        ``SubagentStop`` (which a host fires only for a subagent that finished its work: one that failed
        is told its parent otherwise). The room's parser loads only for its ``end_events``."""
        if self._ends is None or event not in self.end_events:
            return []
        return self._ends()(event, data)

    def answer(self, event: str, text: str) -> str:
        """The stdout of a hook that gives ``text`` to the model ("" gives nothing)."""
        if not text:
            return ""
        # ASCII with escapes: the host's pipe may not be UTF-8, and JSON carries any text that way
        if event == STOP:
            return json.dumps({"decision": "block", "reason": text}) + "\n"
        return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}) + "\n"

    def __repr__(self) -> str:
        return f"HookAdapter({self.name!r}, {self.catalog!r}, {self.events!r}, {self.observes!r})"


class Place:
    """Where a room's host keeps the sessions the monitor reads, as something a person can set.

    ``option``: its keyword (``gw.upstream.configure(claude_root=...)``) and, with dashes, its flag on
    ``sessionwatch node`` (``--claude-root``), which offers it when ``served``: a paired node serves the
    room's transcripts (its reader is ``TranscriptFiles``). ``help``: what it is, and its default."""

    __slots__ = ("help", "option", "served")

    def __init__(self, option: str, help: str, *, served: bool = False) -> None:
        self.option = option
        self.help = help
        self.served = served

    @property
    def flag(self) -> str:
        return "--" + self.option.replace("_", "-")

    def __repr__(self) -> str:
        return f"Place({self.option!r})"


class Room:
    """One host's room, as the registry holds it (see the module's doc).

    ``place``: where its sessions are, settable (None: only where the host puts them). ``mcp_session_env``:
    the variable in which the host hands the MCP servers it starts its session's id (None: it does not)."""

    __slots__ = (
        "_installer",
        "_process",
        "_push",
        "_reader",
        "gateway_route",
        "hook",
        "label",
        "mcp_session_env",
        "place",
        "program",
        "scopes",
    )

    def __init__(
        self,
        hook: HookAdapter,
        *,
        label: str,
        program: str,
        scopes: tuple[str, ...],
        installer: Callable[[], Installer],
        reader: Callable[[], TranscriptFiles | SessionReader],
        gateway_route: bool = True,
        place: Place | None = None,
        mcp_session_env: str | None = None,
        process: Callable[[], Callable[[int], int]] | None = None,
        push: Callable[[], Channel] | None = None,
    ) -> None:
        self.hook = hook
        self.label = label  # how people call the host: "Claude Code"
        self.program = program  # the host's executable (doctor shows its version)
        self.scopes = scopes  # where install can write: project, local, user
        self.gateway_route = gateway_route  # through a gateway the hook's quick path posts to its hook route
        self.place = place
        self.mcp_session_env = mcp_session_env
        self._installer = installer
        self._reader = reader
        self._process = process
        self._push = push

    @property
    def name(self) -> str:
        return self.hook.name

    @property
    def catalog(self) -> str:
        return self.hook.catalog

    def installer(self) -> Installer:
        return self._installer()

    def reader(self) -> TranscriptFiles | SessionReader:
        return self._reader()

    def session_process(self, host_pid: int) -> int:
        """The process whose end means a session of this host is gone, from the pid of the process that
        ran its hook (the host, past a shell): that pid itself unless the host runs its sessions
        elsewhere (a Codex TUI's threads run in a daemon that all its TUIs share)."""
        return host_pid if self._process is None else self._process()(host_pid)

    def push_channel(self) -> Channel | None:
        """How a message reaches a running or idle session of this host from outside its hooks, and how
        a server the host started learns its session (``hosts/push.py``); None: the host has no channel
        (its notices wait for the next hook or tool call)."""
        return None if self._push is None else self._push()

    def __repr__(self) -> str:
        return f"Room({self.name!r})"
