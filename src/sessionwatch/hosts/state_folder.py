"""Where sessionwatch keeps its per-user state: the hooks' answer state, install's snapshots, the default store."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """``$SESSIONWATCH_STATE_DIR``, else ``$XDG_STATE_HOME/sessionwatch`` (``~/.local/state``), where the
    default store lives too."""
    env = os.environ.get("SESSIONWATCH_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sessionwatch"
