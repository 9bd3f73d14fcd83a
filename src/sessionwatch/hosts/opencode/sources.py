"""Who sent each prompt, as sessionwatch's OpenCode plugin saw it (nothing in OpenCode's own database says).

The plugin's ``chat.message`` hook runs for every prompt that enters a session, before OpenCode stores it,
and appends one line per prompt to ``<folder of the database>/sessionwatch/prompts/<session id>.jsonl``:
``{"messageID", "source": "person" | "program" | "unknown", "why", "at"}``. Next to the database, so whoever can
read the database (the monitor) finds the file without sharing any other setting with the host. A user
message that entered without ``chat.message`` (OpenCode's replay of the pending prompt after a compaction)
gets an ``unknown`` line from the plugin's event hook a moment later; an ``unknown`` never overrides a
``person`` or ``program`` line for the same message (another process may see a prompt only as an event).

The reader takes only the last ``TAIL_BYTES`` of the file (a session's recent prompts), and a file that
is missing or unreadable simply means "no plugin evidence": the conservative rule decides then.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PERSON = "person"
PROGRAM = "program"
UNKNOWN = "unknown"  # a server (``opencode serve``, ``web``, ``acp``) took it: any client could have sent it
TAIL_BYTES = 256 * 1024


def folder(db_path: Path) -> Path:
    return db_path.parent / "sessionwatch" / "prompts"


def path_for(db_path: Path, session_id: str) -> Path:
    return folder(db_path) / f"{session_id}.jsonl"


def read(db_path: Path, session_id: str) -> dict[str, str] | None:
    """message id -> ``person``, ``program`` or ``unknown``; None when the plugin left no file for this session."""
    path = path_for(db_path, session_id)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > TAIL_BYTES:
                fh.seek(size - TAIL_BYTES)
                fh.readline()  # the first line is cut
            raw = fh.read(TAIL_BYTES)
    except OSError:
        return None
    out: dict[str, str] = {}
    for line in raw.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written, or damaged: no evidence for that prompt
        if not isinstance(row, dict):
            continue
        mid, source = row.get("messageID"), row.get("source")
        if isinstance(mid, str) and source in (PERSON, PROGRAM, UNKNOWN):
            if source == UNKNOWN and out.get(mid) in (PERSON, PROGRAM):
                continue  # another OpenCode process saw the prompt only as an event: the sender's record stands
            out[mid] = source
    return out
