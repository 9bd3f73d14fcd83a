"""A real gateway in a subprocess (``python -m sessionwatch.http``) on a free 127.0.0.1 port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _limit_files(n: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


class GatewayProcess:
    """One ``python -m sessionwatch.http`` process; ``start()`` returns when health says ok."""

    def __init__(self, store_url: str, log_path: Path, *, token: str | None = None, env: dict[str, str] | None = None,
                 extra_args: list[str] | None = None, port: int | None = None,
                 nofile: int | None = None) -> None:
        self.store_url = store_url
        self.log_path = log_path
        self.token = token
        self.env = env or {}
        self.extra_args = extra_args or []
        self.port = port or free_port()
        self.nofile = nofile  # the server's RLIMIT_NOFILE (soft and hard), when a test needs a known one
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def spawn(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
        env.update({"SESSIONWATCH_ACCESS_LOG": "0", **self.env})
        args = [sys.executable, "-m", "sessionwatch.http", "--port", str(self.port), "--store", self.store_url,
                "--no-monitor", "--log-level", "warning", *self.extra_args]
        if self.token:
            args += ["--token", self.token]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=_limit_files(self.nofile) if self.nofile else None)
        log.close()
        return self.proc

    def start(self, timeout: float = 20.0) -> GatewayProcess:
        self.spawn()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                res = httpx.get(self.url + "/v1/health", timeout=2)
                last = res.json()
                if res.status_code == 200:
                    return res.json()
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.05)
        raise RuntimeError(f"gateway not ready in {timeout} s: {last}; log: {self.log_path.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator:
    started: list[GatewayProcess] = []

    def make(store_url: str | None = None, **kw: object) -> GatewayProcess:
        gp = GatewayProcess(store_url or f"sqlite:///{tmp_path}/state.db", tmp_path / f"gateway{len(started)}.log",
                            **kw)  # type: ignore[arg-type]
        started.append(gp)
        return gp

    yield make
    for gp in started:
        try:
            gp.stop(signal.SIGKILL)
        except Exception:
            pass


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway for tests that only need a running server (each test uses its own session keys)."""
    base = tmp_path_factory.mktemp("shared")
    gp = GatewayProcess(f"sqlite:///{base}/state.db", base / "gateway.log").start()
    yield gp
    gp.stop()


@pytest.fixture
def http(shared_gateway: GatewayProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=shared_gateway.url, timeout=10) as client:
        yield client
