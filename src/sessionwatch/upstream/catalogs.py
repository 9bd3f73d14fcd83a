"""Local catalogs: the transcripts of every room whose host writes JSONL files (Claude Code, Codex), listing
and locating them on this machine. Where each host keeps them is its room's (``hosts/<room>/transcripts.py``,
a ``hosts.transcripts.TranscriptFiles``): Claude Code under ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``, Codex CLI
under ``$CODEX_HOME`` or ``~/.codex``. A thread id is checked against a strict pattern before it touches a
path, and every file found must resolve (symlinks followed) to a place inside the catalog's folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, NotFound
from ..hosts.registry import ROOMS
from ..hosts.transcripts import TranscriptFiles
from ..hosts.transcripts.files import THREAD_ID, inside
from ..hosts.transcripts.rows import RowRules, _loads

HEAD_BYTES = 64 * 1024
TITLE_CHARS = 120


def _files() -> dict[str, TranscriptFiles]:
    out: dict[str, TranscriptFiles] = {}
    for room in ROOMS.values():
        reader = room.reader()
        if isinstance(reader, TranscriptFiles):
            out[reader.catalog_id] = reader
    return out


FILES = _files()  # catalog id -> where its transcripts are (the rooms whose hosts write JSONL)
CATALOG_IDS = tuple(FILES)  # served by a paired node too
# catalogs of a room that reads its own sessions (upstream/rooms.py): on this machine only, never served by a node
ROOM_CATALOG_IDS = tuple(r.catalog for r in ROOMS.values() if r.catalog not in FILES)

__all__ = ["CATALOG_IDS", "FILES", "ROOM_CATALOG_IDS", "THREAD_ID", "Found", "LocalCatalog", "inside"]


def check_thread_id(value: object) -> str:
    if not isinstance(value, str) or THREAD_ID.fullmatch(value) is None or ".." in value:
        raise InvalidArgument(f"threadId must match {THREAD_ID.pattern} (no path parts), got {value!r}")
    return value


def check_catalog(value: object) -> str:
    if not isinstance(value, str) or value not in (*CATALOG_IDS, *ROOM_CATALOG_IDS):
        raise NotFound(f"unknown catalog {value!r}; catalogs: {', '.join((*CATALOG_IDS, *ROOM_CATALOG_IDS))}")
    return value


@dataclass(slots=True)
class Found:
    thread_id: str
    path: str
    mtime_ms: int
    size: int


def default_root(catalog: str) -> Path:
    return FILES[catalog].default_root()


class LocalCatalog:
    """One catalog on this machine. ``upstream_kind`` names the CLI that writes it."""

    def __init__(self, catalog_id: str, root: str | os.PathLike[str] | None = None) -> None:
        self.catalog_id = check_catalog(catalog_id)
        if self.catalog_id not in FILES:
            raise NotFound(f"catalog {catalog_id!r} is not one of transcript files ({', '.join(CATALOG_IDS)})")
        self.files = FILES[self.catalog_id]
        self.root = Path(root) if root is not None else self.files.default_root()
        self.rules: RowRules = self.files.rules
        self.upstream_kind = self.files.upstream_kind

    @property
    def base(self) -> Path:
        return self.files.base(self.root)

    # -- finding files --------------------------------------------------------------------------
    def _candidates(self, thread_id: str | None) -> list[tuple[str, str]]:
        """(thread id, path) of transcript files, optionally only those of one thread."""
        base = self.base
        try:
            out = self.files.candidates(base, thread_id)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        return [(tid, p) for tid, p in out if inside(p, base)]

    def _regular_files(self, thread_id: str | None) -> Iterator[tuple[str, str, os.stat_result]]:
        """(thread id, path, stat) of every candidate that is a regular file right now."""
        for tid, path in self._candidates(thread_id):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if _is_regular(st.st_mode):
                yield tid, path, st

    def locate(self, thread_id: str) -> Found | None:
        """The newest regular file for the thread, or None. Raises OSError when the folder is unreadable."""
        check_thread_id(thread_id)
        best: Found | None = None
        for tid, path, st in self._regular_files(thread_id):
            found = Found(tid, os.path.abspath(path), st.st_mtime_ns // 1_000_000, st.st_size)
            if best is None or found.mtime_ms > best.mtime_ms:
                best = found
        return best

    def exists(self, thread_id: str) -> bool:
        """Whether any entry (file or not) is there for the thread: tells "missing" from "not a file"."""
        return bool(self._candidates(check_thread_id(thread_id)))

    def list_threads(self, *, include_paths: bool = True) -> list[dict[str, Any]]:
        threads: dict[str, dict[str, Any]] = {}
        for tid, path, st in self._regular_files(None):
            mtime = st.st_mtime_ns // 1_000_000
            prev = threads.get(tid)
            if prev is not None and prev["updatedAt"] >= mtime:
                continue
            info: dict[str, Any] = {
                "catalogId": self.catalog_id,
                "threadId": tid,
                "updatedAt": mtime,
                "sizeBytes": st.st_size,
            }
            info.update(self._head_info(path))
            if include_paths:
                info["filePath"] = os.path.abspath(path)
            threads[tid] = info
        return sorted(threads.values(), key=lambda t: (-t["updatedAt"], t["threadId"]))

    def _head_info(self, path: str) -> dict[str, Any]:
        """cwd and a title (the first prompt a person typed) from the first 64 KiB."""
        out: dict[str, Any] = {}
        try:
            with open(path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
        except OSError:
            return out
        for line in head.split(b"\n")[:-1] if b"\n" in head else []:
            if not line.strip():
                continue
            if "cwd" not in out and b'"cwd"' in line:
                try:
                    row = _loads(line)
                except ValueError:
                    row = None
                if isinstance(row, dict):
                    cwd = row.get("cwd")
                    if cwd is None and isinstance(row.get("payload"), dict):
                        cwd = row["payload"].get("cwd")
                    if isinstance(cwd, str):
                        out["cwd"] = cwd
            if "title" not in out:
                verdict = self.rules.classify(line)
                if verdict.human:
                    text = verdict.text if verdict.text is not None else " ".join(verdict.parts or [])
                    if text:
                        out["title"] = text[:TITLE_CHARS]
            if "cwd" in out and "title" in out:
                break
        return out


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)
