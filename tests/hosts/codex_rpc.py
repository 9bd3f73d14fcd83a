"""A minimal client of ``codex app-server`` over stdio (one JSON object per line), for the host tests.

It starts the real binary in a :class:`CodexHome`, does the ``initialize`` / ``initialized`` exchange,
and offers requests (``call``) and waiting for a notification (``wait_for``). Notifications that arrive
while waiting for something else are kept, so none is lost.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from typing import Any

from tests.support.hosts import CodexHome
from tests.support.procs import stop


class AppServer:
    def __init__(self, home: CodexHome, client: str = "sessionwatch-tests") -> None:
        self.proc = subprocess.Popen(
            [str(home.binary), "app-server"],
            cwd=home.project,
            env=home.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self._kept: list[dict[str, Any]] = []
        self._next_id = 0
        threading.Thread(target=self._read, name="codex-app-server-reader", daemon=True).start()
        self.call("initialize", {"clientInfo": {"name": client, "version": "1"}})
        self._send({"method": "initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self._inbox.put(message)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _take(self, match: Any, timeout: float, what: str) -> dict[str, Any]:
        for message in self._kept:
            if match(message):
                self._kept.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"codex app-server sent no {what} within {timeout} s")
            try:
                message = self._inbox.get(timeout=left)
            except queue.Empty:
                continue
            if match(message):
                return message
            self._kept.append(message)

    def call(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        self._send({"id": rid, "method": method, "params": params})
        answer = self._take(lambda m: m.get("id") == rid and "method" not in m, timeout, f"answer to {method}")
        assert "error" not in answer, answer
        result = answer.get("result")
        assert isinstance(result, dict), answer
        return result

    def wait_for(self, method: str, timeout: float = 120.0) -> dict[str, Any]:
        return self._take(lambda m: m.get("method") == method, timeout, method)

    def turn(self, thread_id: str, text: str) -> None:
        """Start a turn with one text input, as an app-server client does, and wait until it completes."""
        self.call("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": text}]})
        self.wait_for("turn/completed")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        stop(self.proc)

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
