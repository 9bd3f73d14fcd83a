"""At-least-once delivery through a hook, surviving a lost answer.

A hook cannot know that the host used its answer: the host may time out and kill it, or close the pipe.
So an answer is acknowledged on the *next* hook run of the same session, and only if it was written
completely: before printing, the ids are saved as ``answered: false``; after stdout was flushed they are
marked ``answered: true``. The next run acknowledges an answered set, then peeks; an unanswered set
(killed or broken pipe) is simply still queued and is printed again. One small JSON file per session
under the state directory holds this, replaced atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..hosts.state_folder import state_dir


class AnswerState:
    """The ids of the last answer given for one session of one store or gateway."""

    def __init__(self, where: str, session_key: str, agent_id: str | None) -> None:
        try:  # the builtin module: importing hashlib would load OpenSSL, a noticeable part of a hook run
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover - not CPython
            from hashlib import blake2b
        digest = blake2b(f"{where}\0{agent_id or ''}\0{session_key}".encode(), digest_size=12).hexdigest()
        self.path = state_dir() / "hooks" / f"{digest}.json"
        self.session_key = session_key

    def load(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        ids = data.get("ids") if isinstance(data, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return None
        return {"ids": ids, "answered": data.get("answered") is True}

    def save(self, ids: list[int], *, answered: bool) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"sessionKey": self.session_key, "ids": ids, "answered": answered}), encoding="utf-8")
        os.replace(tmp, self.path)  # atomic: a concurrent hook of the same session reads old or new

    @contextmanager
    def exclusive(self, wait_s: float = 0.25) -> Iterator[None]:
        """Hold this session's lock (a file in ``hook-locks/``) for one delivery. A delivery takes a few
        milliseconds; one stuck on a server that does not answer must not hold the others past their own
        budget, so after ``wait_s`` a run goes on unlocked (a notice may then be given twice, never lost)."""
        import fcntl
        import time

        folder = self.path.parent.parent / "hook-locks"
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / self.path.with_suffix(".lock").name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the lock

    def clear(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def handed_out(session_key: str) -> set[int]:
    """The entry ids a hook has handed to ``session_key``'s host and not yet seen acknowledged (every
    answer file of that session, whatever store or agent it was for). The push leaves these alone: the
    session has them, or gets them at its next hook."""
    out: set[int] = set()
    folder = state_dir() / "hooks"
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("sessionKey") == session_key and isinstance(data.get("ids"), list):
            out.update(i for i in data["ids"] if isinstance(i, int) and not isinstance(i, bool))
    return out
