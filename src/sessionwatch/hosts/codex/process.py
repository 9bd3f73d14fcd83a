"""Which process a Codex session lives in, for the ``lost`` check.

``codex exec`` runs its hooks itself: the hook's host is the session's process. A Codex TUI runs its
threads in an app-server daemon (``codex app-server ... --managed-daemon``) that every TUI of one
``CODEX_HOME`` shares and that outlives them, and the daemon runs the hooks: its pid says nothing about
one session. The TUI is the process whose death leaves the session without anyone (the daemon even
finishes a running turn for nobody), so for a hook run by the daemon the TUI is looked up in ``/proc``:
a ``codex`` process that is not a daemon, an ``exec`` or a server, with the same ``CODEX_HOME``, whose
folder is the hook's (Codex runs a hook in its session's folder). Exactly one such process is the
session's; with none or several (two TUIs in one folder) the daemon stays the answer, which never
takes a live session for lost.

Linux only (``/proc``); elsewhere the hook's host is the answer. Standard library only.
"""

from __future__ import annotations

import os

# Subcommands of the codex CLI that are not an interactive TUI session (the TUI is ``codex [PROMPT]``,
# ``codex resume``, ``codex fork``)
NOT_TUI = frozenset(
    {
        "exec",
        "e",
        "app-server",
        "mcp-server",
        "mcp",
        "login",
        "logout",
        "apply",
        "a",
        "cloud",
        "completion",
        "debug",
        "sandbox",
        "features",
        "help",
        "proxy",
        "responses-api-proxy",
        "stdio-to-uds",
        "queue",
    }
)


def _cmdline(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a] or None


def is_daemon(pid: int) -> bool:
    """Is ``pid`` a Codex TUI's shared app-server daemon?"""
    argv = _cmdline(pid)
    if not argv:
        return False
    return os.path.basename(argv[0]) == "codex" and "app-server" in argv and "--managed-daemon" in argv


def _codex_home(environ: dict[str, str]) -> str:
    home = environ.get("CODEX_HOME") or os.path.join(environ.get("HOME", ""), ".codex")
    return os.path.realpath(home)


def _environ(pid: str) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def tuis(home: str, folder: str, *, skip: tuple[int, ...] = ()) -> list[int]:
    """The Codex TUI processes of this user whose ``CODEX_HOME`` is ``home`` and folder ``folder``."""
    found: list[int] = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if int(pid) in skip:
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue  # gone, or another user's
        if os.path.basename(exe.removesuffix(" (deleted)")) != "codex":
            continue  # the npm wrapper runs under node: its native child is the TUI
        argv = _cmdline(pid)
        if not argv or NOT_TUI.intersection(argv[1:]):
            continue
        try:
            if os.path.realpath(os.readlink(f"/proc/{pid}/cwd")) != folder:
                continue
        except OSError:
            continue
        environ = _environ(pid)
        if environ is None or _codex_home(environ) != home:
            continue
        found.append(int(pid))
    return found


def session_process(host: int) -> int:
    """The process whose end means the session that ran this hook is gone: the TUI when ``host`` (the
    hook's host) is a TUI's daemon and one TUI fits, else ``host``."""
    if not os.path.isdir("/proc/self") or not is_daemon(host):
        return host
    try:
        folder = os.path.realpath(os.getcwd())
    except OSError:
        return host
    found = tuis(_codex_home(dict(os.environ)), folder, skip=(host, os.getpid()))
    return found[0] if len(found) == 1 else host
