"""A background SSE reader: collects (arrival time, event, data) from ``GET /v1/stream``."""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from typing import Any

import httpx


class SSEReader:
    def __init__(self, base_url: str, key: str, headers: dict[str, str] | None = None) -> None:
        self.base_url, self.key, self.headers = base_url, key, headers or {}
        self.events: queue.Queue[tuple[float, str, Any]] = queue.Queue()
        self.comments: list[str] = []
        self.subscribed = threading.Event()
        self.ended = threading.Event()
        self.status: int | None = None
        self.ids: list[str] = []  # the id: of each event, in order
        self.retry: int | None = None
        self._sock: socket.socket | None = None
        self._client = httpx.Client(base_url=base_url, timeout=httpx.Timeout(10, read=None))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, timeout: float = 10) -> SSEReader:
        self._thread.start()
        assert self.subscribed.wait(timeout), "the stream did not open"
        return self

    def _run(self) -> None:
        try:
            with self._client.stream("GET", "/v1/stream", params={"sessionKey": self.key}, headers=self.headers) as res:
                self.status = res.status_code
                self._sock = res.extensions["network_stream"].get_extra_info("socket")
                event, data = "message", []
                for line in res.iter_lines():
                    if line.startswith(":"):
                        self.comments.append(line)
                        self.subscribed.set()
                    elif line == "":
                        if data:
                            self.events.put((time.monotonic(), event, json.loads("\n".join(data))))
                        event, data = "message", []
                    elif line.startswith("id:"):
                        self.ids.append(line[3:].strip())
                    elif line.startswith("retry:"):
                        self.retry = int(line[6:].strip())
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
        except httpx.HTTPError:
            pass
        finally:
            self.subscribed.set()
            self.ended.set()

    def next(self, timeout: float) -> tuple[float, str, Any] | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        # Closing the client does not interrupt a blocked read in the reader thread; shutting the
        # socket down does (and the gateway sees the disconnect at once).
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._client.close()
        self._thread.join(5)
