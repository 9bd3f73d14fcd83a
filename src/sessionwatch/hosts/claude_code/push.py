"""Push into a running or idle Claude Code session: one short line to its inbox socket.

Claude Code binds a unix socket per process and hands its path and token to the hooks and MCP servers it
starts (``CLAUDE_CODE_MESSAGING_SOCKET``, ``CLAUDE_CODE_MESSAGING_TOKEN``), and its session's id
(``CLAUDE_CODE_SESSION_ID``). A line written to the socket reaches a busy session at its next tool
boundary and starts a turn in an idle one. The MCP server Claude Code starts for a session runs as long
as that session, so it is the one that pushes (``hosts/push.py``). The socket is named after Claude
Code's pid (``<pid>.sock``) and disappears with the process: a socket that is gone is a process gone.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ..push import Channel, Gone, Inbox
from ..session_keys import host_id, key_of, session_agent
from .room import HOOK

SESSION_ENV = "CLAUDE_CODE_SESSION_ID"
SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"
TOKEN_ENV = "CLAUDE_CODE_MESSAGING_TOKEN"
SEND_TIMEOUT_S = 2.0


class SocketInbox(Inbox):
    def __init__(self, path: str, token: str | None) -> None:
        self.path = path
        self.token = token
        stem = Path(path).stem
        self.pid = int(stem) if stem.isdigit() else None  # Claude Code's process: the socket is <pid>.sock

    def send(self, text: str) -> None:
        lines: list[dict[str, object]] = []
        if self.token:
            lines.append({"type": "auth", "token": self.token})
        lines.append({"type": "user", "message": {"role": "user", "content": text}, "priority": "next"})
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(SEND_TIMEOUT_S)
            try:
                sock.connect(self.path)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise Gone(f"{self.path}: {exc.strerror or exc}") from None
            sock.sendall(data)


class ClaudeChannel(Channel):
    host = HOOK.name

    def serves(self) -> bool:
        return bool(os.environ.get(SOCKET_ENV) or os.environ.get(SESSION_ENV))

    def inbox(self, session_key: str) -> Inbox | None:
        path = os.environ.get(SOCKET_ENV)
        return SocketInbox(path, os.environ.get(TOKEN_ENV) or None) if path else None

    def own_session(self, agent: str | None) -> str | None:
        """Claude Code hands its servers the session's id and project folder (which names the agent)."""
        sid = host_id(os.environ.get(SESSION_ENV))
        return key_of(session_agent(agent, {}), HOOK.catalog, sid) if sid is not None else None


CHANNEL = ClaudeChannel()
