"""Push into a Codex TUI session: a turn (or a steer of the running one) through its app-server daemon.

The Codex TUI runs its threads in an app-server daemon that listens on
``$CODEX_HOME/app-server-control/app-server-control.sock`` (JSON-RPC over a WebSocket on a unix socket)
and accepts a second client. The session's hooks register where it runs (``register``: its thread,
the daemon's socket, the running turn) in the state folder; the session's MCP server, which Codex runs
as long as the session, pushes through it (``CodexInbox``, driven by ``claude_inbox.Pusher``): one
``turn/steer`` of the running turn, or one ``turn/start`` of an idle thread, whose text tells the agent
to reconcile. ``codex exec`` has no daemon, so it registers nothing, and its notices wait for the next
hook. The same rules as Claude Code's push: at most once per notice, never acknowledging, a daemon that
is gone (or does not hold the thread) ends the pushing.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

from .claude_inbox import Gone, NotYet
from .delivery import state_dir

TIMEOUT_S = 5.0


def control_socket() -> Path:
    home = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
    return Path(home) / "app-server-control" / "app-server-control.sock"


def _registration(session_key: str) -> Path:
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - not CPython
        from hashlib import blake2b
    return state_dir() / "push" / f"codex-{blake2b(session_key.encode(), digest_size=12).hexdigest()}.json"


def register(session_key: str, thread_id: str, turn_id: str | None) -> None:
    """A hook of a Codex session: where it runs (only when a TUI daemon listens), and its running turn
    (None once the turn ended)."""
    sock = control_socket()
    if not sock.exists():
        return
    path = _registration(session_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"threadId": thread_id, "turnId": turn_id, "socket": str(sock)}), encoding="utf-8")
    os.replace(tmp, path)


def _connect(sock: socket.socket, path: str) -> None:
    """Connect to a unix socket whose path may be longer than the 108 bytes ``sun_path`` holds (a deep
    ``CODEX_HOME``): through its real path, else through the folder's descriptor in /proc."""
    real = os.path.realpath(path)
    if len(real.encode()) < 100 or not os.path.isdir("/proc/self/fd"):
        sock.connect(real)
        return
    folder = os.open(os.path.dirname(real), os.O_RDONLY)
    try:
        sock.connect(f"/proc/self/fd/{folder}/{os.path.basename(real)}")
    finally:
        os.close(folder)


class _WebSocket:
    """The few WebSocket frames the daemon's JSON-RPC needs: text out (masked, as a client must), text in."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT_S)
        try:
            _connect(self.sock, path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self.sock.close()
            raise Gone(f"{path}: {exc.strerror or exc}") from None
        except OSError:
            self.sock.close()
            raise
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("the daemon closed the connection during the handshake")
            buf += chunk
        head, _, self.rest = buf.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0] + b" ":
            raise OSError(f"the daemon refused the WebSocket upgrade: {head[:80]!r}")

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        n = len(data)
        if n < 126:
            head = bytes([0x81, 0x80 | n])
        elif n < 1 << 16:
            head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", n)
        else:
            head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _take(self, n: int) -> bytes:
        while len(self.rest) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("the daemon closed the connection")
            self.rest += chunk
        out, self.rest = self.rest[:n], self.rest[n:]
        return out

    def reply(self, request_id: int) -> dict[str, Any]:
        """The answer to ``request_id`` (notifications in between are passed over)."""
        while True:
            b1, b2 = self._take(2)
            n = b2 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._take(8))[0]
            mask = self._take(4) if b2 & 0x80 else b""
            data = self._take(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if b1 & 0x0F == 8:
                raise OSError("the daemon closed the connection")
            if b1 & 0x0F != 1:
                continue
            message = json.loads(data)
            if isinstance(message, dict) and message.get("id") == request_id:
                return message

    def close(self) -> None:
        self.sock.close()


class CodexInbox:
    """``send(text)`` for ``claude_inbox.Pusher``: the registered thread's daemon, a steer or a turn."""

    path = "codex app-server"

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key

    def send(self, text: str) -> None:
        try:
            where = json.loads(_registration(self.session_key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise NotYet("no hook of the session registered its thread yet") from None
        self.path = str(where["socket"])
        ws = _WebSocket(self.path)
        try:
            ws.send(
                {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "sessionwatch", "version": "1"}}}
            )
            ws.reply(1)
            ws.send({"method": "initialized"})
            words = [{"type": "text", "text": text}]
            answer: dict[str, Any] = {"error": "no turn"}
            if where.get("turnId"):  # busy: into the running turn, after its current tool output
                steer = {"threadId": where["threadId"], "expectedTurnId": where["turnId"], "input": words}
                ws.send({"id": 2, "method": "turn/steer", "params": steer})
                answer = ws.reply(2)
            if "error" in answer:  # idle (or the turn just ended): a turn of its own
                ws.send({"id": 3, "method": "turn/start", "params": {"threadId": where["threadId"], "input": words}})
                answer = ws.reply(3)
            if "error" in answer:
                raise Gone(f"the daemon does not take thread {where['threadId']}: {answer['error']}")
        finally:
            ws.close()
