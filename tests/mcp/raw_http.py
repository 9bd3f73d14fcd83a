"""A bare MCP streamable-HTTP client on plain sockets, for tests that cut a connection at a chosen point.

Every exchange is one HTTP/1.1 request on its own connection (``Connection: close``); ``reset`` closes a
socket with SO_LINGER 0, so the server sees a TCP reset, as when a client process dies or a network drops.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any
from urllib.parse import urlsplit

PROTOCOL = "2025-06-18"


def reset(sock: socket.socket) -> None:
    """Close with a reset (RST), not an orderly FIN: unread bytes are thrown away."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


def messages_of(content_type: str, body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer: a JSON body, or the ``data:`` lines of an SSE stream."""
    if content_type.startswith("application/json"):
        return [json.loads(body)] if body.strip() else []
    found = []
    for line in body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip():
            found.append(json.loads(line[5:]))
    return found


class RawMCP:
    """One MCP session (``initialize`` + ``notifications/initialized``) spoken over raw sockets."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.token = token
        self.session: str | None = None
        self._ids = 0

    def _request(self, payload: dict[str, Any]) -> bytes:
        body = json.dumps(payload).encode()
        headers = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Authorization: Bearer {self.token}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            "Connection: close",
            f"Content-Length: {len(body)}",
        ]
        if self.session is not None:
            headers += [f"Mcp-Session-Id: {self.session}", f"MCP-Protocol-Version: {PROTOCOL}"]
        return ("\r\n".join(headers) + "\r\n\r\n").encode() + body

    def open(self, payload: dict[str, Any]) -> socket.socket:
        """Send one request and return its connection, the answer unread."""
        sock = socket.create_connection((self.host, self.port), timeout=30)
        sock.sendall(self._request(payload))
        return sock

    def read_head(self, sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
        """The status, headers and whatever body bytes came with them."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed before the headers: {data!r}")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
        return int(status_line.split()[1]), headers, rest

    def read_answer(self, sock: socket.socket) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
        """Read an answer to its end (the server closes the connection after it)."""
        with sock:
            status, headers, body = self.read_head(sock)
            while chunk := sock.recv(65536):
                body += chunk
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = _dechunk(body)
        return status, headers, messages_of(headers.get("content-type", ""), body)

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def initialize(self) -> None:
        init = {
            "jsonrpc": "2.0",
            "id": self.next_id(),
            "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }
        status, headers, _ = self.read_answer(self.open(init))
        assert status == 200, status
        self.session = headers["mcp-session-id"]
        status, _, _ = self.read_answer(self.open({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        assert status == 202, status

    def tool_call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.next_id(),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call read to the end: its structured result."""
        request = self.tool_call(name, arguments)
        status, _, messages = self.read_answer(self.open(request))
        assert status == 200, status
        [answer] = [m for m in messages if m.get("id") == request["id"]]
        result: dict[str, Any] = answer["result"]["structuredContent"]
        return result
