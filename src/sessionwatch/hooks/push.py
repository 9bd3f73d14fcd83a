"""Which push a session's MCP server runs: into Claude Code's inbox socket, or a Codex TUI's daemon.

Both inboxes are driven by the same ``claude_inbox.Pusher`` (at most one push per notice, never
acknowledging); this module only picks the one the environment names, so neither inbox imports the other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..hosts.registry import ROOMS
from .claude_inbox import Inbox, Pusher, PushState

HOST_ENV = "SESSIONWATCH_HOST_CLI"  # what ``install codex`` sets in its MCP server's environment


def start_pusher(where: str, session_key: str, peek: Callable[[], Sequence[Any]]) -> Pusher | None:
    """The pusher of a server Claude Code started (its inbox in the environment) or Codex started
    (``SESSIONWATCH_HOST_CLI=codex``: its TUI daemon, once a hook registered the thread), else None."""
    if os.environ.get("SESSIONWATCH_PUSH", "1") == "0":
        return None
    inbox: Any = Inbox.from_env()
    room = ROOMS.get(os.environ.get(HOST_ENV) or "")
    if inbox is None and room is not None and room.hook.daemon_push:
        from .codex_push import CodexInbox  # loaded only for Codex

        inbox = CodexInbox(session_key)
    if inbox is None:
        return None
    return Pusher(inbox, peek, session_key, PushState(where, session_key)).start()
