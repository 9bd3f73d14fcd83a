"""Which process a Claude Code session lives in, for the ``lost`` check: Claude Code's own, which names its
inbox socket after its pid (``<tmp>/cc-socks/<pid>.sock``) and hands it to every hook and MCP server it
starts; without it (``SessionEnd`` gets none), the hook's host. Standard library only."""

from __future__ import annotations

import os

SOCKET_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"


def session_process(host: int) -> int:
    stem = os.path.basename(os.environ.get(SOCKET_ENV) or "").rpartition(".")[0]
    return int(stem) if stem.isdigit() else host
