"""The order of one host session's hook writes.

A hook run whose writes are left to a detached child (``cli/fast.py``) answers its host at once, so the
host fires its next event while that child is still loading the engine; a child that started later can
then write first, and the store keeps the newer state and drops the older report as late: a ``Stop``'s
``idle`` lost behind the ``SessionEnd`` that followed it within milliseconds, a prompt's ``working``
behind an immediate permission request. So every run that writes takes a ticket, in the order the host
fired the events (before it forks), and writes only once the runs holding the tickets before it have
written (or have had their time). A run the host waits on waits only its budget; if it only reports (the
host takes no answer from its event), it then lets the host go on and waits on in a detached child.

A file per host session in the state folder (``hooks/<digest>.order``) holds two numbers under ``flock``:
the next ticket and the highest one served. Best-effort throughout: no state folder, no session id, a
file that cannot be locked, all mean no ticket and the run writes as before; a predecessor that died
without saying so is waited for at most ``wait_s``. Standard library only, like the quick path.
"""

from __future__ import annotations

import fcntl
import os
import time

from ..hosts.state_folder import state_path

DETACHED_WAIT_S = 30.0  # a detached child waits this long at most: nobody waits for it, and on a busy
# machine the runs before it may all be loading the engine at once (only a dead one costs the whole wait)
FOREGROUND_WAIT_S = 2.0  # a run the host waits for: the hook's budget
POLL_S = 0.01


class Ticket:  # a plain class: importing dataclasses or typing is a noticeable part of a hook run
    __slots__ = ("number", "path")

    def __init__(self, path: str, number: int) -> None:
        self.path = path
        self.number = number

    def wait_turn(self, wait_s: float) -> bool:
        """Wait until every earlier ticket was served (True), or ``wait_s`` passed (False: go on)."""
        deadline = time.monotonic() + wait_s
        while True:
            numbers = _locked(self.path, None)
            if numbers is None or numbers[1] >= self.number - 1:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def served(self) -> None:
        """This run's writes are done (or given up): the next ticket's turn."""
        _locked(self.path, lambda nxt, served: (nxt, max(served, self.number)))


def ticket(host: str, session_id: object) -> Ticket | None:
    """The next ticket of ``host``'s session ``session_id`` (None: no order kept for it)."""
    if not host or not isinstance(session_id, str) or not session_id or len(session_id) > 512:
        return None
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - not CPython
        from hashlib import blake2b
    digest = blake2b(f"{host}\0{session_id}".encode(), digest_size=12).hexdigest()
    path = os.path.join(state_path(), "hooks", f"{digest}.order")
    taken: list[int] = []

    def take(nxt: int, served: int) -> tuple[int, int]:
        taken.append(nxt)
        return nxt + 1, served

    if _locked(path, take, create=True) is None or not taken:
        return None
    return Ticket(path, taken[0])


def _locked(path: str, change: object, *, create: bool = False) -> tuple[int, int] | None:
    """(next ticket, highest served) read under the file's lock, and written back as ``change`` makes
    them (a callable of the two, or None to only read); None when the file cannot be had."""
    try:
        if create:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        else:
            fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, 64).split()
        try:
            numbers = (int(raw[0]), int(raw[1])) if len(raw) == 2 else (1, 0)
        except ValueError:
            numbers = (1, 0)  # a torn or foreign file: start again (the order is best-effort)
        if callable(change):
            numbers = change(*numbers)
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, f"{numbers[0]} {numbers[1]}".encode())
        return numbers
    except OSError:
        return None
    finally:
        os.close(fd)  # releases the lock
