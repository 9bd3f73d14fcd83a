"""The process id of the host that ran a hook, so a session whose host died can be told ``lost``.

The host is the hook's parent, or the parent of the shell it ran the hook in. Its room says which process
is the session's own (``Room.session_process``): Claude Code's (its inbox socket names it), a Codex TUI's
(not the daemon that runs its hooks).
"""

from __future__ import annotations

import os

PID_ENV = "SESSIONWATCH_HOST_PID"  # set by a hook run for the detached child it forks (cli/fast.py)
AT_ENV = "SESSIONWATCH_HOOK_AT"
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})


def _stat(pid: int) -> tuple[str, int] | None:
    """(command name, parent pid) from /proc, or None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            raw = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'
    head, _, tail = raw.rpartition(")")
    fields = tail.split()
    try:
        return head.partition("(")[2], int(fields[1])
    except (IndexError, ValueError):
        return None


def remember_host(at_ms: int | None = None) -> None:
    """Keep the host's pid and the hook's start (``at_ms``, else this moment) for a child that runs on after
    this process has exited."""
    import time

    os.environ[PID_ENV] = str(host_pid())
    os.environ[AT_ENV] = str(at_ms if at_ms is not None else int(time.time() * 1000))


def hook_started_at() -> int | None:
    """When the hook run that forked this process started (ms), if it did."""
    at = os.environ.get(AT_ENV, "")
    return int(at) if at.isdigit() else None


def host_pid() -> int:
    remembered = os.environ.get(PID_ENV, "")
    if remembered.isdigit():
        return int(remembered)
    parent = os.getppid()
    found = _stat(parent)
    if found is not None and found[0] in SHELLS and found[1] > 1:
        return found[1]
    return parent


def session_pid(host: str) -> int:
    """The pid whose end means the session of this hook run is gone, for the ``lost`` check."""
    pid = host_pid()
    from ..hosts.registry import ROOMS

    room = ROOMS.get(host)
    if room is None:
        return pid
    try:
        return room.session_process(pid)
    except OSError:  # /proc changed under the look-up: the host's own pid never takes a live session for lost
        return pid
