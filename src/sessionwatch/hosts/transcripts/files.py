"""Where a host keeps its JSONL transcripts: what a room whose host writes them gives the monitor.

``upstream`` does the reading (listing, the byte-offset scan, a paired node's items) for every such room;
the room says where the files are (``default_root``, ``base``), which files are threads (``candidates``)
and which rows are a person's prompt (``rules``). A thread id is checked against :data:`THREAD_ID` before
it touches a path, and every file found must resolve (symlinks followed) inside the catalog's folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .rows import RowRules

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def plain_id(value: str) -> bool:
    """Whether ``value`` can stand in a file name as a thread id (no path parts)."""
    return THREAD_ID.fullmatch(value) is not None and ".." not in value


def inside(path: str | os.PathLike[str], base: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves (following symlinks) to somewhere strictly inside ``base``."""
    real = os.path.realpath(path)
    real_base = os.path.realpath(base)
    return real.startswith(real_base.rstrip(os.sep) + os.sep)


class TranscriptFiles:
    """A host's transcript folder. ``root_env``: the variable that moves the host's home (else
    ``~/<home_dir>``); ``folder``: the transcripts' folder under it; ``upstream_kind``: what a link's
    ``upstreamKind`` says."""

    def __init__(
        self, catalog_id: str, upstream_kind: str, rules: RowRules, *, root_env: str, home_dir: str, folder: str
    ) -> None:
        self.catalog_id = catalog_id
        self.upstream_kind = upstream_kind
        self.rules = rules
        self.root_env = root_env
        self.home_dir = home_dir
        self.folder = folder

    def default_root(self) -> Path:
        env = os.environ.get(self.root_env)
        return Path(env) if env else Path.home() / self.home_dir

    def base(self, root: Path) -> Path:
        return root / self.folder

    def candidates(self, base: Path, thread_id: str | None) -> list[tuple[str, str]]:
        """(thread id, path) of the transcript files under ``base``, optionally only one thread's. May raise
        FileNotFoundError or NotADirectoryError (nothing there)."""
        raise NotImplementedError
