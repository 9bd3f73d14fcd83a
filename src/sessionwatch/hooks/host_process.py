"""The process id of the host that ran a hook, so a session whose host died can be told ``lost``.

Claude Code names its inbox socket after its own pid (``<tmp>/cc-socks/<pid>.sock``) and hands it to
every hook. Otherwise the host is the hook's parent, or the parent of the shell it ran the hook in.
"""

from __future__ import annotations

import os

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


def host_pid() -> int:
    sock = os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET")
    if sock:
        stem = os.path.basename(sock).rpartition(".")[0]
        if stem.isdigit():
            return int(stem)
    parent = os.getppid()
    found = _stat(parent)
    if found is not None and found[0] in SHELLS and found[1] > 1:
        return found[1]
    return parent
