"""A person's Codex TUI in a pty, on a trusted project, against the fake model server.

The TUI runs its threads in an app-server daemon it starts (``codex app-server --managed-daemon``), in a
session of its own, so the daemon outlives the TUI: ``codex_tui`` stops it at the end by the pids its
own pid files name. The TUI draws little in a pty that answers none of its terminal queries, but it
says its state in an OSC sequence (``ESC ] 7501 ; state=idle:app=codex``): ``ready`` waits for that.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .hosts import HostHome
from .tui import Tui
from .waiting import wait_until


def trust_project(h: HostHome, extra: str = "") -> None:
    """The project folder trusted (what the TUI's first-start question does; ``install codex --project``
    does it too), plus ``extra`` top-level config (before any table)."""
    config = h.home / ".codex" / "config.toml"
    text = extra + config.read_text()
    if f'[projects."{h.project}"]' not in text:
        text += f'\n[projects."{h.project}"]\ntrust_level = "trusted"\n'
    config.write_text(text)


def daemon_socket(h: HostHome) -> Path:
    return h.home / ".codex" / "app-server-control" / "app-server-control.sock"


def daemon_pids(h: HostHome) -> list[int]:
    """The daemon's and its updater's pids, from the files the daemon writes."""
    out = []
    for name in ("daemon.pid", "daemon-updater.pid"):
        try:
            out.append(int(json.loads((h.home / ".codex" / "app-server-daemon" / name).read_text())["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return out


def _home_processes(h: HostHome) -> list[int]:
    """Processes running a program installed under this test's ``CODEX_HOME`` (the daemon's releases)."""
    home = str(h.home / ".codex")
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with suppress(OSError):
            if os.readlink(f"/proc/{pid}/exe").startswith(home + "/"):
                found.append(int(pid))
    return found


def stop_daemon(h: HostHome) -> None:
    """The daemon and its updater, by pid: the updater first (it would start the daemon again), then what
    runs from this home's daemon releases (a daemon the updater replaced is not in the pid file)."""
    for pid in reversed(daemon_pids(h)):
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in _home_processes(h) if os.path.isdir("/proc") else []:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def tui_state(tui: Tui) -> str | None:
    """The last state the TUI announced (``idle``, ``busy``, …), or None before the first."""
    raw = tui.raw
    at = raw.rfind(b"\x1b]7501;state=")
    if at < 0:
        return None
    return raw[at + len(b"\x1b]7501;state=") :].split(b":", 1)[0].split(b"\x1b", 1)[0].decode(errors="replace")


@contextmanager
def codex_tui(h: HostHome, *args: str) -> Iterator[Tui]:
    """The TUI started in the project folder (trust it first: ``trust_project``), ready for typing."""
    tui = Tui(h, *args)
    try:
        wait_until(
            lambda: daemon_socket(h).exists() and tui_state(tui) is not None,
            timeout=90,
            interval=0.2,
            what="the Codex TUI ready (its daemon listening)",
        )
        yield tui
    finally:
        tui.close()
        stop_daemon(h)
