"""A host's interactive terminal UI in a pseudo-terminal: what a person sees and types.

Only the TUI marks a prompt as typed by a person (Claude Code writes ``promptSource: "typed"``; a ``-p``
prompt is ``"sdk"``), and only a live TUI has an idle session to push into. ``Tui`` starts the host
binary on a pty in its scratch home, reads the screen (escape sequences stripped) on a thread, types
text the way a terminal does, and kills the whole process group at the end.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import threading
import time
from pathlib import Path

from .hosts import ClaudeHome, HostHome
from .waiting import wait_until

_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78]")


def prepare_claude(h: ClaudeHome) -> None:
    """First-run screens answered in advance: onboarding done, the fake API key approved, the project
    folder trusted (what a person clicks once on a new machine)."""
    config = h.home / ".claude.json"
    data = json.loads(config.read_text()) if config.exists() else {}
    data.update(
        hasCompletedOnboarding=True,
        theme="dark",
        customApiKeyResponses={"approved": ["fake-key"[-20:]], "rejected": []},
    )
    projects = data.setdefault("projects", {})
    projects.setdefault(str(h.project), {}).update(hasTrustDialogAccepted=True, hasCompletedProjectOnboarding=True)
    config.write_text(json.dumps(data))


class Tui:
    def __init__(self, h: HostHome, *args: str, env: dict[str, str] | None = None) -> None:
        self.h = h
        self._raw = bytearray()
        self._lock = threading.Lock()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the host, in its project folder, in a terminal of its own
            try:
                os.chdir(h.project)
                full = {**h.env(), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40", **(env or {})}
                os.execve(str(h.binary), [str(h.binary), *args], full)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self._reader = threading.Thread(target=self._read, name="tui-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    chunk = os.read(self.fd, 65536)
                    if not chunk:
                        return
                    with self._lock:
                        self._raw += chunk
            except OSError:
                return

    @property
    def screen(self) -> str:
        """Everything shown so far, escape sequences stripped."""
        with self._lock:
            raw = bytes(self._raw)
        return _ESCAPES.sub(b"", raw).decode("utf-8", "replace")

    def raw(self) -> bytes:
        """Everything the host wrote, escape sequences included (some say what state a TUI is in)."""
        with self._lock:
            return bytes(self._raw)

    def mark(self) -> int:
        """A position in the screen text, for :meth:`wait_for` to look only at what came after it."""
        return len(self.screen)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 60.0) -> str:
        rx = re.compile(pattern)

        def seen() -> str | None:
            m = rx.search(self.screen, after)
            return m.group(0) if m else None

        return wait_until(
            seen, timeout=timeout, interval=0.1, what=f"{pattern!r} on the screen: {self.screen[-600:]!r}"
        )

    def type(self, text: str, *, enter: bool = True) -> None:
        """Type ``text`` as a person does (then Enter): characters first, the Enter a moment later, so
        the UI takes it as typing rather than a paste."""
        os.write(self.fd, text.encode())
        if enter:
            time.sleep(0.5)
            os.write(self.fd, b"\r")

    def alive(self) -> bool:
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        """Kill the host and everything it started (hooks, MCP servers)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass

    def __enter__(self) -> Tui:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def transcripts(h: HostHome) -> list[Path]:
    return sorted((h.home / ".claude" / "projects").rglob("*.jsonl"))
