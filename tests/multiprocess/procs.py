"""Real processes for the multi-gateway tests: HTTP gateways, an SSE reader, and recorder workers."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.support.ports import listening_socket, port_of, spawn_serving
from tests.support.procs import stop
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    env["SESSIONWATCH_ACCESS_LOG"] = "0"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class HttpGateway:
    """``python -m sessionwatch.http`` on a socket this process opened (``--fd``); ``client`` talks to it."""

    def __init__(self, store_url: str, log_path: Path) -> None:
        sock = listening_socket()
        self.store_url, self.log_path, self.port = store_url, log_path, port_of(sock)
        self.url = f"http://127.0.0.1:{self.port}"
        log = open(log_path, "ab")
        self.proc = spawn_serving(
            [
                sys.executable,
                "-m",
                "sessionwatch.http",
                "--store",
                store_url,
                "--no-monitor",
                "--log-level",
                "warning",
                "--keepalive",
                "1",
            ],
            sock,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
        log.close()
        self.client = httpx.Client(base_url=self.url, timeout=20)

    def wait_ready(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            assert self.proc.poll() is None, f"gateway exited: {self.log_path.read_text()[-3000:]}"
            return httpx.get(self.url + "/v1/health", timeout=5).status_code == 200

        wait_until(healthy, timeout=timeout, interval=0.05, what=f"gateway health 200 ({self.log_path})")

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        res = self.client.request(method, path, json=body, **kw)
        assert res.status_code < 400, (res.status_code, res.text)
        return res.json()

    def stop(self) -> None:
        self.client.close()
        stop(self.proc, 15)


class WakeReader:
    """Reads ``/v1/stream`` on a thread; wakes land in ``wakes`` (a queue)."""

    def __init__(self, gateway: HttpGateway, key: str) -> None:
        self.wakes: queue.Queue[dict[str, Any]] = queue.Queue()
        self.subscribed = threading.Event()
        self._stop = False
        self._client = httpx.Client(base_url=gateway.url, timeout=httpx.Timeout(20, read=None))
        self._thread = threading.Thread(target=self._run, args=(key,), daemon=True)
        self._thread.start()
        assert self.subscribed.wait(20), "the SSE stream did not open"

    def _run(self, key: str) -> None:
        try:
            with self._client.stream("GET", "/v1/stream", params={"sessionKey": key}) as res:
                event = None
                for line in res.iter_lines():
                    if self._stop:
                        return
                    if line.startswith(": subscribed"):
                        self.subscribed.set()
                    elif line.startswith("event:"):
                        event = line.split(":", 1)[1].strip()
                    elif line.startswith("data:") and event == "wake":
                        self.wakes.put(json.loads(line.split(":", 1)[1]))
        except httpx.HTTPError:
            pass

    def next(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self.wakes.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._stop = True
        self._client.close()


class Recorder:
    """A worker process (``recorder.py``) recording human turns; reads the sequences it committed."""

    def __init__(self, store_url: str, worker: int, n: int, targets: list[str], *, pace_ms: float = 0) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("recorder.py")),
                store_url,
                str(worker),
                str(n),
                ",".join(targets),
                str(pace_ms),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.committed: list[int] = []
        self.ready = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "ready":
                self.ready.set()
            elif line == "done":
                self.done.set()
            elif line.isdigit():
                self.committed.append(int(line))

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self, timeout: float = 120) -> None:
        self.proc.wait(timeout)
        self._thread.join(10)
        assert self.proc.returncode == 0, self.proc.stderr.read() if self.proc.stderr else ""
