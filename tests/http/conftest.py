"""A real gateway in a subprocess (``python -m sessionwatch.http``) serving a 127.0.0.1 socket the test opened."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.ports import listening_socket, port_of, spawn_serving
from tests.support.waiting import wait_until


def _limit_files(n: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return apply


class GatewayProcess:
    """One ``python -m sessionwatch.http`` process; ``start()`` returns when health says ok."""

    def __init__(
        self,
        store_url: str,
        log_path: Path,
        *,
        token: str | None = None,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
        host: str = "127.0.0.1",
        nofile: int | None = None,
    ) -> None:
        self.store_url = store_url
        self.log_path = log_path
        self.token = token
        self.env = env or {}
        self.extra_args = extra_args or []
        self.sock = listening_socket(host)  # handed to the server with --fd (no port race)
        self.port = port_of(self.sock)
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
        args = [
            sys.executable,
            "-m",
            "sessionwatch.http",
            "--store",
            self.store_url,
            "--no-monitor",
            "--log-level",
            "warning",
            *self.extra_args,
        ]
        if self.token:
            args += ["--token", self.token]
        log = open(self.log_path, "ab")
        # This process keeps its copy of the socket until stop() or kill9(): start() after stop(keep_socket=True)
        # serves the same port again.
        self.proc = spawn_serving(
            args,
            self.sock,
            keep=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_limit_files(self.nofile) if self.nofile else None,
        )
        log.close()
        return self.proc

    def start(self, timeout: float = 20.0) -> GatewayProcess:
        self.spawn()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0) -> dict:
        """Health says ok (the restart sweep has finished; before that it says 503 "starting")."""
        proc = self.proc
        assert proc is not None

        def healthy() -> dict | None:
            if proc.poll() is not None:  # an AssertionError ends the wait at once
                raise AssertionError(f"gateway exited with {proc.returncode}")
            res = httpx.get(self.url + "/v1/health", timeout=5)
            return res.json() if res.status_code == 200 else None

        try:
            return wait_until(healthy, timeout=timeout, interval=0.05, what="gateway health 200")
        except AssertionError as exc:
            raise RuntimeError(f"{exc}; log: {self.log_path.read_text()[-2000:]}") from None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0, keep_socket: bool = False) -> int | None:
        """Stop the gateway. ``keep_socket``: keep the listening socket for a restart with ``start()`` (until
        then, connections wait in its backlog); otherwise the port is closed and connections are refused."""
        if not keep_socket:
            self.sock.close()
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
        """A crash: the process dies and nothing listens on the port any more."""
        assert self.proc is not None
        self.sock.close()
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def gateway_factory(tmp_path: Path) -> Iterator:
    started: list[GatewayProcess] = []

    def make(store_url: str | None = None, **kw: object) -> GatewayProcess:
        gp = GatewayProcess(
            store_url or f"sqlite:///{tmp_path}/state.db", tmp_path / f"gateway{len(started)}.log", **kw
        )  # type: ignore[arg-type]
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
