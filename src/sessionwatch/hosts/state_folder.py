"""Where sessionwatch keeps its per-user state: the hooks' answer state, install's snapshots, the default store."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: the hook's quick path reads this module, and pathlib is not free either
if TYPE_CHECKING:
    from pathlib import Path


def state_path() -> str:
    """``$SESSIONWATCH_STATE_DIR``, else ``$XDG_STATE_HOME/sessionwatch`` (``~/.local/state``), where the
    default store lives too."""
    env = os.environ.get("SESSIONWATCH_STATE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "sessionwatch")


def state_dir() -> Path:
    """``state_path()`` as a ``Path``."""
    from pathlib import Path

    return Path(state_path())
