"""A gateway that runs the ``lost`` timer over a test's store, and a host turn that hangs at the model.

The host's hooks (plugin, extension) write to the local store as usual; ``sessionwatch serve`` on the same
store, started with a small ``SESSIONWATCH_LOST_AFTER_MS``, is the process whose timer marks a session
``lost`` once it reported nothing for that long and the host process it reported is gone.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.commands import SESSIONWATCH
from tests.support.fake_model import FakeModel, Reply
from tests.support.ports import listening_socket, spawn_serving, url_of
from tests.support.procs import stop
from tests.support.waiting import wait_http

LOST_AFTER_MS = 1500


@contextmanager
def lost_timer(store: str, env: dict[str, str]) -> Iterator[str]:
    """``sessionwatch serve`` on ``store`` with the lost limit at ``LOST_AFTER_MS``; yields its URL."""
    sock = listening_socket()
    url = url_of(sock)
    server = spawn_serving(
        [*SESSIONWATCH, "serve", "--store", store, "--no-monitor"],
        sock,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env, "SESSIONWATCH_LOST_AFTER_MS": str(LOST_AFTER_MS)},
    )
    try:
        wait_http(f"{url}/v1/health", server, timeout=60)
        yield url
    finally:
        stop(server)


class HangingTurn:
    """The model answers side calls (a title) at once and hangs on the turn's call until released."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.started = threading.Event()
        self.release = threading.Event()

    def __enter__(self) -> HangingTurn:
        def respond(request: dict[str, Any]) -> Reply:
            if not self.model.tool_names(request):
                return Reply.say("A title")  # OpenCode's title call
            return Reply.say("thinking", before=self._hang)

        self.model.respond = respond
        return self

    def _hang(self) -> None:
        self.started.set()
        self.release.wait(600)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.model.respond = None
