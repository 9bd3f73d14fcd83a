"""A child process spoken to in JSON-RPC, one object per line on stdio (``codex app-server``, an MCP
server), with one deadline for the whole exchange."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class RpcError(Exception):
    """The exchange failed; the message says how."""


class LineClient:
    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        timeout: float,
        jsonrpc: bool = False,
        name: str | None = None,
    ) -> None:
        self.name = name or argv[0]
        self.jsonrpc = jsonrpc  # MCP wants "jsonrpc": "2.0" in every message; Codex's app-server does not
        self.deadline = time.monotonic() + timeout
        self.next_id = 0
        self.stderr: list[str] = []
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
            )
        except OSError as exc:
            raise RpcError(f"cannot start {self.name}: {exc}") from None
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.stderr) < 200:
                self.stderr.append(line.rstrip("\n"))

    def last_error_line(self) -> str:
        lines = [x for x in self.stderr if x.strip()]
        return lines[-1].strip() if lines else ""

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def _send(self, message: dict[str, Any]) -> None:
        if self.jsonrpc:
            message = {"jsonrpc": "2.0", **message}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise RpcError(f"{self.name} went away: {exc}") from None

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        want = self.next_id
        self._send({"id": want, "method": method, "params": params})
        while True:
            left = self.deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise RpcError(f"{self.name} did not answer {method} in time") from None
            if line is None:
                self.proc.wait()
                why = self.last_error_line()
                raise RpcError(
                    f"{self.name} exited during {method} (exit {self.proc.returncode})" + (f": {why}" if why else "")
                )
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("id") != want or "method" in message:
                continue  # a notification, or a request to the client
            if "error" in message:
                error = message["error"] or {}
                raise RpcError(f"{self.name} refused {method}: {error.get('message', error)}")
            return message.get("result")

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
