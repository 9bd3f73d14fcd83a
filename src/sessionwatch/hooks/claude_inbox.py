"""Push into a running or idle Claude Code session: one short line to its inbox socket per new notice.

Claude Code binds a unix socket per process and hands its path and token to the hooks and MCP servers it
starts (``CLAUDE_CODE_MESSAGING_SOCKET``, ``CLAUDE_CODE_MESSAGING_TOKEN``). A line written there reaches a
busy session at its next tool boundary and starts a turn in an idle one. The MCP server Claude Code starts
for a session runs as long as that session, so it is the one that pushes (``Pusher``, started by
``sessionwatch mcp`` when the socket is in its environment): it peeks the session's queue about once a
second and, when notices arrived that were never pushed, writes one message telling the agent to
reconcile.

Best effort on top of the normal paths: the notices stay queued and are acknowledged only as before (a
hook's answer, a tool result); a push never moves a cursor; each notice is pushed at most once (the ids
pushed are kept in the state folder, per session, across restarts); a socket that is gone (the process
ended) ends the pushing for good.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .delivery import handed_out, state_dir

log = logging.getLogger("sessionwatch.push")

SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"
TOKEN_ENV = "CLAUDE_CODE_MESSAGING_TOKEN"
POLL_S = 1.0
SEND_TIMEOUT_S = 2.0


class Gone(Exception):
    """The socket is not there or nobody listens: the host process has ended."""


class NotYet(Exception):
    """Nowhere to push yet (no hook of the session said where it runs): try again at the next look."""


class Inbox:
    def __init__(self, path: str, token: str | None) -> None:
        self.path = path
        self.token = token

    @classmethod
    def from_env(cls) -> Inbox | None:
        path = os.environ.get(SOCKET_ENV)
        return cls(path, os.environ.get(TOKEN_ENV) or None) if path else None

    @property
    def pid(self) -> int | None:
        """Claude Code's process id: the socket is named ``<pid>.sock``."""
        stem = Path(self.path).stem
        return int(stem) if stem.isdigit() else None

    def send(self, text: str) -> None:
        lines: list[dict[str, object]] = []
        if self.token:
            lines.append({"type": "auth", "token": self.token})
        lines.append({"type": "user", "message": {"role": "user", "content": text}, "priority": "next"})
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(SEND_TIMEOUT_S)
            try:
                sock.connect(self.path)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise Gone(f"{self.path}: {exc.strerror or exc}") from None
            sock.sendall(data)


def push_text(session_key: str, count: int) -> str:
    """The one short message: which session is told, and what to do; the notices themselves come as
    always (a hook's context, a tool result), so nothing here is delivered twice."""
    what = "a session you rely on has" if count == 1 else f"{count} sessions you rely on have"
    return (
        f"sessionwatch: {what} changed since you last looked (you are {session_key}). Reconcile before "
        "acting: call session_status (sessionwatch), or go on, and the notice arrives with your next tool result."
    )


class PushState:
    """The ids already pushed for one session (at most one push per notice, across restarts)."""

    def __init__(self, where: str, session_key: str) -> None:
        try:
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - not CPython
            from hashlib import blake2b
        digest = blake2b(f"{where}\0{session_key}".encode(), digest_size=12).hexdigest()
        self.path = state_dir() / "push" / f"{digest}.json"

    def load(self) -> set[int]:
        try:
            ids = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return {i for i in ids if isinstance(i, int)} if isinstance(ids, list) else set()

    def save(self, ids: set[int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(sorted(ids)), encoding="utf-8")
        os.replace(tmp, self.path)


class Pusher:
    """Peeks the session's queue every ``interval`` seconds in a daemon thread; pushes what is new."""

    def __init__(
        self,
        inbox: Any,  # send(text), path: Inbox here, codex_push.CodexInbox
        peek: Callable[[], Sequence[Any]],
        session_key: str,
        state: PushState,
        *,
        interval: float = POLL_S,
    ) -> None:
        self.inbox, self.peek, self.session_key, self.state = inbox, peek, session_key, state
        self.interval = interval
        self.pushed = 0  # messages written (tests and logs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sessionwatch-push", daemon=True)

    def start(self) -> Pusher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def once(self) -> bool:
        """One look; False when the socket is gone (stop pushing)."""
        try:
            pending = {int(e["id"]) for e in self.peek()}
        except Exception as exc:  # noqa: BLE001 - a failed read pushes nothing; the next look tries again
            log.debug("push: reading the notices of %s failed: %s", self.session_key, exc)
            return True
        done = self.state.load()
        # a notice a hook of this session has just handed over is the session's already: a push would
        # only start a turn for what the running one has (the hook's answer file lists it until the ack)
        new = pending - done - handed_out(self.session_key)
        if new:
            try:
                self.inbox.send(push_text(self.session_key, len(new)))
            except NotYet as exc:
                log.debug("push: %s", exc)
                return True
            except Gone as exc:
                log.info("push: the host's inbox is gone (%s): no more pushes for %s", exc, self.session_key)
                return False
            except OSError as exc:  # a full or slow socket: the next look tries again
                log.warning("push: writing to %s failed: %s", self.inbox.path, exc)
                return True
            self.pushed += 1
            log.info("push: told %s of %d new notice(s)", self.session_key, len(new))
        if new or done - pending:
            self.state.save((done | new) & pending)  # what left the queue can never be pushed again
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.once():
                return
            self._stop.wait(self.interval)
