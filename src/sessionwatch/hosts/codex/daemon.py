"""A client of a Codex TUI's app-server daemon: JSON-RPC over a WebSocket on its unix control socket.

The Codex TUI runs its threads in an app-server daemon that listens on
``$CODEX_HOME/app-server-control/app-server-control.sock`` and accepts a second client (what
``codex app-server`` offers on stdio, there over a WebSocket). The few frames this needs are written here,
so nothing heavy loads: text out (masked, as a client must), text in.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

from ..push import Gone

TIMEOUT_S = 5.0


def control_socket() -> Path:
    home = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
    return Path(home) / "app-server-control" / "app-server-control.sock"


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


class WebSocket:
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


class Client:
    """One connection to the daemon, introduced as a client: ``request`` after ``request``."""

    def __init__(self, path: str) -> None:
        self.ws = WebSocket(path)
        self._next = 1
        try:
            self.request("initialize", {"clientInfo": {"name": "sessionwatch", "version": "1"}})
            self.ws.send({"method": "initialized"})
        except BaseException:
            self.ws.close()
            raise

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The daemon's answer: ``{"result": …}`` or ``{"error": …}``."""
        self._next += 1
        self.ws.send({"id": self._next, "method": method, "params": params})
        return self.ws.reply(self._next)

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def running_turn(client: Client, thread_id: str) -> str | None:
    """The thread's turn in progress, if any (the daemon's own view: no hook needs to have said it)."""
    answer = client.request("thread/turns/list", {"threadId": thread_id})
    result = answer.get("result")
    turns = result.get("data") if isinstance(result, dict) else None
    for turn in turns if isinstance(turns, list) else []:
        if isinstance(turn, dict) and turn.get("status") == "inProgress" and isinstance(turn.get("id"), str):
            return str(turn["id"])
    return None
