"""OpenCode's shared SQLite database: where it is, and opening it read-only without ever waiting long.

OpenCode keeps every session of every project in one database, ``$OPENCODE_DB`` when set, else
``<data>/opencode/opencode.db`` (``<data>`` = ``$XDG_DATA_HOME``, else ``~/.local/share``). It runs in
WAL mode, so a reader does not block OpenCode's writer; a short busy timeout covers a checkpoint or a
writer in exclusive locking mode, after which the read is simply inconclusive (tried again next tick).

The schema moves between OpenCode releases: :func:`check_schema` says which of the tables and columns
the reader needs are missing, and the reader then answers "inconclusive", never an error.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

BUSY_TIMEOUT_S = 0.5  # a tick reads many links; a locked database must not hold it up
# What the reader reads, table by table (OpenCode 1.18): the rest of each row is never looked at.
NEEDED: dict[str, tuple[str, ...]] = {
    "session": ("id", "parent_id", "directory", "title", "time_created", "time_updated"),
    "message": ("id", "session_id", "time_created", "data"),
    "part": ("id", "message_id", "session_id", "data"),
    "event": ("aggregate_id", "seq", "type", "data"),
}


class Unreadable(Exception):
    """The database cannot be read right now (locked, busy, damaged, a schema the reader does not know):
    inconclusive, not a missing session."""


def default_path() -> Path:
    """The database OpenCode itself would open in this environment."""
    explicit = os.environ.get("OPENCODE_DB")
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "opencode" / "opencode.db"


def _uri(path: Path) -> str:
    text = os.path.abspath(path)
    for ch, esc in (("%", "%25"), ("?", "%3F"), ("#", "%23")):
        text = text.replace(ch, esc)
    return f"file:{text}?mode=ro"


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``: never creates the file, never writes it). Raises
    FileNotFoundError when there is no database, Unreadable when it cannot be opened."""
    if not path.is_file():
        raise FileNotFoundError(str(path))
    try:
        conn = sqlite3.connect(_uri(path), uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        raise Unreadable(f"cannot open {path}: {exc}") from None
    return conn


def check_schema(conn: sqlite3.Connection) -> list[str]:
    """What the reader needs and the database lacks (``table`` or ``table.column``); [] when all is there."""
    missing: list[str] = []
    try:
        for table, columns in NEEDED.items():
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not have:
                missing.append(table)
                continue
            missing += [f"{table}.{c}" for c in columns if c not in have]
    except sqlite3.Error as exc:
        raise Unreadable(f"reading the schema failed: {exc}") from None
    return missing
