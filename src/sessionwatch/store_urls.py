"""What a store URL looks like, for every layer that decides something by it: the PostgreSQL schemes, and the
per-user SQLite file a store opens when none is named. Standard library only."""

from __future__ import annotations

import os
from pathlib import Path

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def default_sqlite_path() -> Path:
    """The per-user store file: ``$XDG_STATE_HOME/sessionwatch/sessionwatch.db`` (``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sessionwatch" / "sessionwatch.db"
