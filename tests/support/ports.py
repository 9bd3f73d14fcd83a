"""Ports for tests: the listening socket itself is handed to the server, never a number found free.

A port found free by binding and closing a socket can be taken by anyone before the server binds it
again (another test, another test run on the same machine), so a test that passes the number races.
Here the test binds and listens, then hands the socket over:

- an in-process uvicorn server gets it with ``Server.run(sockets=[sock])`` (see :class:`ServerThread`);
- a server started as a subprocess (``sessionwatch serve``, ``mcp --transport http``, ``node``,
  ``python -m sessionwatch.http``, ``python -m sessionwatch.node_server``) inherits it with
  ``Popen(..., pass_fds=[sock.fileno()])`` and serves it with ``--fd N`` (see :func:`spawn_serving`).

The socket listens from the start, so a client that connects before the server accepts waits in the
backlog instead of being refused.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import uvicorn

from .waiting import wait_until

LOOPBACK = "127.0.0.1"


def listening_socket(host: str = LOOPBACK, backlog: int = 128) -> socket.socket:
    """A TCP socket bound to a port of the kernel's choosing on ``host``, already listening."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def url_of(sock: socket.socket) -> str:
    host = str(sock.getsockname()[0])
    return f"http://[{host}]:{port_of(sock)}" if ":" in host else f"http://{host}:{port_of(sock)}"


def fd_args(sock: socket.socket) -> list[str]:
    """The server options that make a child serve on ``sock`` (it must be passed with ``pass_fds``)."""
    return ["--fd", str(sock.fileno())]


def spawn_serving(
    args: Sequence[str], sock: socket.socket, *, keep: bool = False, **popen: Any
) -> subprocess.Popen[Any]:
    """Start ``args + ["--fd", N]`` with ``sock`` inherited as descriptor N, then close this process's copy.

    Only the child holds the port afterwards: when it exits, connections are refused (as they would be
    for a real server that died), not left waiting in a backlog nobody reads. ``keep=True`` leaves this
    process's copy open, for a test that restarts the server on the same socket (the caller closes it).
    """
    try:
        return subprocess.Popen([*args, *fd_args(sock)], pass_fds=[sock.fileno()], **popen)
    finally:
        if not keep:
            sock.close()


class ServerThread:
    """An ASGI app served by uvicorn on a thread of this process, on a loopback socket opened here."""

    def __init__(self, app: Any, lifespan: str = "off") -> None:
        self.sock = listening_socket()
        self.port = port_of(self.sock)
        self.url = url_of(self.sock)
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=LOOPBACK, port=self.port, log_level="warning", lifespan=lifespan)
        )
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        wait_until(lambda: self.server.started, timeout=10, interval=0.01, what="the uvicorn thread's startup")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextmanager
def refusing_port(host: str = LOOPBACK) -> Iterator[int]:
    """A port where nothing listens, for "the server is down" tests only.

    The port stays bound (without listening) while the block runs, so nobody else can start listening on
    it: a connection is refused for as long as the test needs, with no race.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        yield port_of(sock)
