"""What ``install`` changed in each config file, kept in the state folder (never in the project), so that
``uninstall`` can put every file back exactly as it was.

One small JSON file per config file, under ``<state folder>/install/``: the file's bytes before the first
install (or that there was no file), the digest of the bytes install last left there, and the folders
install created for it. Uninstall gives the old bytes back only while the file is exactly as install left
it; a file that someone, or the host itself, changed since is edited instead (only our entries come out),
so nobody's later work is thrown away.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from hashlib import blake2b, sha256
from pathlib import Path
from typing import Any

from .state_folder import state_dir


def digest(data: bytes | None) -> str | None:
    return None if data is None else sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@dataclass
class Snapshot:
    path: Path
    before: bytes | None  # the bytes before the first install; None: there was no file
    known: bool  # False when install found its own entries already there (the true "before" is lost)
    after: str | None = None  # digest of what install last left in the file
    dirs: list[str] = field(default_factory=list)  # folders install created for the file, deepest first
    # which installs have entries here ("owners"), the shared entries each needs ("needs") and those that
    # were there before any install ("preexisting"), the trust entries Codex wrote for each ("trust")
    extra: dict[str, Any] = field(default_factory=dict)

    def matches(self, current: bytes | None) -> bool:
        """The file is exactly as install left it."""
        return self.after is not None and self.after == digest(current)


def _record(path: Path) -> Path:
    name = blake2b(str(path).encode(), digest_size=12).hexdigest()
    return state_dir() / "install" / f"{name}.json"


def load(path: Path) -> Snapshot | None:
    try:
        data = json.loads(_record(path).read_text(encoding="utf-8"))
        before = data["before"]
        return Snapshot(
            path=path,
            before=None if before is None else base64.b64decode(before),
            known=bool(data["known"]),
            after=data.get("after"),
            dirs=[str(d) for d in data.get("dirs", [])],
            extra=dict(data.get("extra", {})),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def begin(path: Path, current: bytes | None, ours_already: bool) -> Snapshot:
    """The snapshot to update for a change about to be made to ``path`` (holding ``current``): the
    recorded one while the file is as install left it, else a new one taken now."""
    snap = load(path)
    if snap is not None and snap.matches(current):
        return snap
    fresh = Snapshot(path, current, known=not ours_already)
    if snap is not None:  # the file changed since: what we added is still ours to take out
        fresh.extra = snap.extra
    return fresh


def save(snap: Snapshot, now: bytes | None) -> None:
    snap.after = digest(now)
    record = _record(snap.path)
    record.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "path": str(snap.path),
        "before": None if snap.before is None else base64.b64encode(snap.before).decode(),
        "known": snap.known,
        "after": snap.after,
        "dirs": snap.dirs,
        "extra": snap.extra,
    }
    tmp = record.with_suffix(f".{os.getpid()}.tmp")
    # the person's own config may hold secrets: only they may read the copy
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(body, out)
    os.replace(tmp, record)


def drop(path: Path) -> None:
    try:
        _record(path).unlink()
    except FileNotFoundError:
        pass


def make_parents(path: Path) -> list[str]:
    """Create the missing folders above ``path``; the ones created, deepest first."""
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    return [str(p) for p in missing]


def remove_empty(dirs: list[str]) -> None:
    for d in dirs:  # deepest first
        try:
            os.rmdir(d)
        except OSError:  # not empty (someone put something there) or gone: leave it
            break


def remove_folders(folders: list[str]) -> None:
    """The folders install created, once their files are gone: deepest first, each only when empty."""
    for folder in sorted(set(folders), key=len, reverse=True):
        remove_empty([folder])


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.sessionwatch-{os.getpid()}.tmp")
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp.write_bytes(data)
    if mode is not None:
        os.chmod(tmp, mode)  # keep the file's permissions (~/.claude.json is private)
    os.replace(tmp, path)
