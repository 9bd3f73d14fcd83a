"""The agent of a host session's own key when none was given: the name of the folder it runs in (see
``identity.py``). Standard library only: the hook's quick path uses it.
"""

from __future__ import annotations

import os

DEFAULT_AGENT = "main"
MAX_AGENT = 64
AGENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")


def agent_from_folder(folder: str) -> str:
    """A folder's name as an agent id: lower case, runs of anything but letters, digits, ``_ . -`` as one
    ``-``, at most 64 characters; ``main`` when nothing is left (``/``, a name of symbols only)."""
    name = os.path.basename(os.path.normpath(folder)) if folder else ""
    out: list[str] = []
    for ch in name.lower():
        if ch in AGENT_CHARS or (ch.isalnum() and ch.isprintable()):
            out.append(ch)
        elif not out or out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-.")[:MAX_AGENT].strip("-.") or DEFAULT_AGENT
