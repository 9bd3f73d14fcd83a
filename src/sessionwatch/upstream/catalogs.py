"""Local catalogs: where Claude Code and Codex CLI keep their transcripts, listing and locating them.

Claude Code: ``<root>/projects/<escaped-cwd>/<session-id>.jsonl`` (root = ``$CLAUDE_CONFIG_DIR`` or
``~/.claude``). Codex CLI: ``<root>/sessions/YYYY/MM/DD/rollout-<timestamp>-<thread-id>.jsonl`` (root =
``$CODEX_HOME`` or ``~/.codex``). A thread id is checked against a strict pattern before it touches a
path, and every file found must resolve (symlinks followed) to a place inside the catalog's folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument, NotFound
from .rows import RowRules, _loads, rules_for

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_CODEX_NAME = re.compile(
    r"rollout-.*-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl"
)
HEAD_BYTES = 64 * 1024
TITLE_CHARS = 120
CATALOG_IDS = ("claude", "codex")
# catalogs of a host room (upstream/rooms.py): on this machine only, never served by a node
ROOM_CATALOG_IDS = ("opencode", "pi")


def check_thread_id(value: object) -> str:
    if not isinstance(value, str) or THREAD_ID.fullmatch(value) is None or ".." in value:
        raise InvalidArgument(f"threadId must match {THREAD_ID.pattern} (no path parts), got {value!r}")
    return value


def claude_thread_of(file_name: str) -> str | None:
    """The thread id a Claude transcript file name stands for, or None when the catalog does not offer it.

    The one rule for both listing and serving: sub-agent transcripts (``agent-*.jsonl``) belong to their
    parent session and are not threads of their own, so they are neither listed nor served by name.
    """
    if not file_name.endswith(".jsonl") or file_name.startswith("agent-"):
        return None
    tid = file_name[:-6]
    return tid if THREAD_ID.fullmatch(tid) and ".." not in tid else None


def check_catalog(value: object) -> str:
    if not isinstance(value, str) or value not in (*CATALOG_IDS, *ROOM_CATALOG_IDS):
        raise NotFound(f"unknown catalog {value!r}; catalogs: {', '.join((*CATALOG_IDS, *ROOM_CATALOG_IDS))}")
    return value


def default_root(catalog: str) -> Path:
    if catalog == "claude":
        env = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(env) if env else Path.home() / ".claude"
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


def inside(path: str | os.PathLike[str], base: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves (following symlinks) to somewhere strictly inside ``base``."""
    real = os.path.realpath(path)
    real_base = os.path.realpath(base)
    return real.startswith(real_base.rstrip(os.sep) + os.sep)


@dataclass(slots=True)
class Found:
    thread_id: str
    path: str
    mtime_ms: int
    size: int


class LocalCatalog:
    """One catalog on this machine. ``upstream_kind`` names the CLI that writes it."""

    def __init__(self, catalog_id: str, root: str | os.PathLike[str] | None = None) -> None:
        self.catalog_id = check_catalog(catalog_id)
        self.root = Path(root) if root is not None else default_root(catalog_id)
        self.rules: RowRules = rules_for(catalog_id)
        self.upstream_kind = "claude-cli" if catalog_id == "claude" else "codex-cli"

    @property
    def base(self) -> Path:
        return self.root / ("projects" if self.catalog_id == "claude" else "sessions")

    # -- finding files --------------------------------------------------------------------------
    def _candidates(self, thread_id: str | None) -> list[tuple[str, str]]:
        """(thread id, path) of transcript files, optionally only those of one thread."""
        base = self.base
        out: list[tuple[str, str]] = []
        try:
            if self.catalog_id == "claude":
                for project in os.scandir(base):
                    if not project.is_dir():
                        continue
                    if thread_id is not None:
                        if claude_thread_of(thread_id + ".jsonl") != thread_id:
                            return []  # a name the listing never shows is not served either
                        path = os.path.join(project.path, thread_id + ".jsonl")
                        if os.path.lexists(path):
                            out.append((thread_id, path))
                        continue
                    for entry in os.scandir(project.path):
                        tid = claude_thread_of(entry.name)
                        if tid is not None:
                            out.append((tid, entry.path))
            else:
                pattern = f"*/*/*/rollout-*-{thread_id}.jsonl" if thread_id else "*/*/*/rollout-*.jsonl"
                for rollout in base.glob(pattern):
                    m = _CODEX_NAME.fullmatch(rollout.name)
                    if m and (thread_id is None or m.group(1) == thread_id):
                        out.append((m.group(1), str(rollout)))
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
