"""Where Pi keeps its sessions, and finding one by id or listing them.

Pi writes ``<agent dir>/sessions/--<cwd, / as ->--/<time>_<session id>.jsonl`` (agent dir:
``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``); ``$PI_CODING_AGENT_SESSION_DIR`` puts the files straight
into that folder instead. The first line is the header (``type: session``, ``id``, ``cwd``, and
``parentSession`` for a fork). A session id is checked against a strict pattern before it touches a path,
and every file found must resolve inside the sessions folder.
"""

from __future__ import annotations

import os
import re
import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .reader import _loads, _message_prompt

CATALOG = "pi"
UPSTREAM_KIND = "pi-cli"
AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
SESSION_DIR_ENV = "PI_CODING_AGENT_SESSION_DIR"
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_NAME = re.compile(r"[^_/]+_([A-Za-z0-9][A-Za-z0-9._-]{0,199})\.jsonl")
HEAD_BYTES = 64 * 1024
TITLE_CHARS = 120


def agent_dir() -> Path:
    env = os.environ.get(AGENT_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def session_of(file_name: str) -> str | None:
    """The session id a file name stands for, or None."""
    m = _NAME.fullmatch(file_name)
    return m.group(1) if m and ".." not in m.group(1) else None


@dataclass(slots=True)
class Found:
    thread_id: str
    path: str
    mtime_ms: int
    size: int


def _inside(path: str, base: str) -> bool:
    real, real_base = os.path.realpath(path), os.path.realpath(base)
    return real.startswith(real_base.rstrip(os.sep) + os.sep)


class PiSessions:
    """The Pi sessions on this machine (``root``: the agent dir; ``sessions``: the folder of the files)."""

    catalog_id = CATALOG
    upstream_kind = UPSTREAM_KIND

    def __init__(self, root: str | os.PathLike[str] | None = None, sessions: str | os.PathLike[str] | None = None):
        self.root = Path(root) if root is not None else agent_dir()
        env = os.environ.get(SESSION_DIR_ENV) if root is None else None
        self.base = Path(sessions) if sessions is not None else Path(env) if env else self.root / "sessions"

    def _files(self) -> list[tuple[str, str, os.stat_result]]:
        """(session id, path, stat) of every regular session file, in the folder and one level down."""
        out: list[tuple[str, str, os.stat_result]] = []
        base = str(self.base)
        try:
            top = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return []
        entries: list[os.DirEntry[str]] = []
        for entry in top:
            if entry.is_dir(follow_symlinks=False):
                try:
                    entries.extend(os.scandir(entry.path))
                except OSError:
                    continue
            else:
                entries.append(entry)
        for entry in entries:
            sid = session_of(entry.name)
            if sid is None or not _inside(entry.path, base):
                continue
            try:
                st = os.stat(entry.path)
            except OSError:
                continue
            if stat_mod.S_ISREG(st.st_mode):
                out.append((sid, entry.path, st))
        return out

    def locate(self, thread_id: str) -> Found | None:
        """The newest file of the session, or None. Raises OSError when the folder is unreadable."""
        best: Found | None = None
        for sid, path, st in self._files():
            if sid == thread_id:
                found = Found(sid, os.path.abspath(path), st.st_mtime_ns // 1_000_000, st.st_size)
                if best is None or found.mtime_ms > best.mtime_ms:
                    best = found
        return best

    def list_threads(self, *, include_paths: bool = True, cwd: str | None = None) -> list[dict[str, Any]]:
        """Every session, newest first, with its folder (``cwd``) and title (its first prompt); ``cwd``
        keeps only the sessions run in that folder."""
        threads: dict[str, dict[str, Any]] = {}
        for sid, path, st in self._files():
            mtime = st.st_mtime_ns // 1_000_000
            prev = threads.get(sid)
            if prev is not None and prev["updatedAt"] >= mtime:
                continue
            info: dict[str, Any] = {"catalogId": CATALOG, "threadId": sid, "updatedAt": mtime, "sizeBytes": st.st_size}
            info.update(head_info(path))
            if include_paths:
                info["filePath"] = os.path.abspath(path)
            threads[sid] = info
        out = sorted(threads.values(), key=lambda t: (-t["updatedAt"], t["threadId"]))
        if cwd is not None:
            want = os.path.realpath(cwd)
            out = [t for t in out if isinstance(t.get("cwd"), str) and os.path.realpath(t["cwd"]) == want]
        return out


def head_info(path: str) -> dict[str, Any]:
    """``cwd``, ``parentSession`` and a title (the first prompt) from the file's first 64 KiB."""
    out: dict[str, Any] = {}
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return out
    lines = head.split(b"\n")[:-1]
    for i, line in enumerate(lines):
        try:
            row = _loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(row, dict):
            continue
        if i == 0 and row.get("type") == "session":
            if isinstance(row.get("cwd"), str):
                out["cwd"] = row["cwd"]
            if isinstance(row.get("parentSession"), str):
                out["parentSession"] = row["parentSession"]
            continue
        prompt = _message_prompt(row)
        if prompt is not None and prompt.text and not prompt.text.startswith("!"):
            out["title"] = " ".join(prompt.text.split())[:TITLE_CHARS]
            break
    return out
