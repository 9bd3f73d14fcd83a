"""The push into a running or idle host session, what every room's channel shares.

A host that can take a message from outside a session's own hooks (Claude Code's inbox socket, a Codex
TUI's app-server daemon) has a :class:`Channel` in its room (``hosts/<room>/push.py``, the room's
``push`` card entry). The session's MCP server, which the host runs as long as the session, drives it
with a :class:`Pusher`: it peeks the session's queue about once a second and, when notices arrived that
were never pushed, writes one short message telling the agent to reconcile; the notices themselves come
as always (a hook's context, a tool result).

Best effort on top of the normal paths: the notices stay queued and are acknowledged only as before; a
push never moves a cursor; each notice is pushed at most once (the ids pushed are kept in the state
folder, per session, across restarts of the server); a notice a hook has just handed to the session is
not pushed (the session has it); an address that is gone (the process ended) is dropped, ends the
pushing and is reported (``gone``), which makes a working or waiting session whose process that was
``lost`` at once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .state_folder import state_dir

log = logging.getLogger("sessionwatch.push")

POLL_S = 1.0
PUSH_ENV = "SESSIONWATCH_PUSH"  # "0": no push at all (the notices come with the next hook or tool call)
INTERVAL_ENV = "SESSIONWATCH_PUSH_INTERVAL"  # seconds between looks (default 1)
HOST_ENV = "SESSIONWATCH_HOST_CLI"  # the host that started this MCP server, when it says nothing itself


class Gone(Exception):
    """The address is not there or nobody there holds the session: the host process has ended."""


class NotYet(Exception):
    """Nowhere to push yet (no hook of the session said where it runs): try again at the next look."""


class Inbox:
    """Where one session takes a pushed message."""

    path = ""  # what it is, for the log
    pid: int | None = None  # the process whose address this is, when known (a gone one is reported)

    def send(self, text: str) -> None:
        """Write ``text`` in; raises Gone, NotYet or OSError (a full or slow address: tried again later)."""
        raise NotImplementedError


class Channel:
    """A room's push: where its sessions take a message, and how a server it started learns its session.
    Every method has a default that offers nothing."""

    host = ""
    binds_late = False  # a server it started without a key learns its session late (session_of_call)

    def serves(self) -> bool:
        """Was this process started by this host (as a session's MCP server)?"""
        return False

    def inbox(self, session_key: str) -> Inbox | None:
        """Where ``session_key`` takes a push, from this process's environment; None: nowhere."""
        return None

    def own_session(self, agent: str | None) -> str | None:
        """The key of the session this server was started for, when the host's environment names it."""
        return None

    def session_of_call(self, meta: Mapping[str, Any] | None, agent: str | None) -> str | None:
        """The session a tool call runs in, when the host names it in the call (MCP ``_meta``)."""
        return None

    def unclaimed_session(self, agent: str | None) -> str | None:
        """A server that knows no session yet: the one its hooks registered for it (claimed, so no other
        server takes it), or None."""
        return None

    def release(self, session_key: str) -> None:
        """Give a claimed session back (the server learned it serves another)."""

    def register(self, session_key: str, data: Mapping[str, Any], event: str, host_pid: int, at: int) -> None:
        """A hook of the session (run by ``host_pid``, started at ``at`` ms) notes where it runs, when the
        host needs that. Hooks may write out of order (after their answer): the latest start wins."""

    def forget(self, session_key: str) -> None:
        """Drop what a hook registered for the session (its address is gone)."""


def push_text(session_key: str, count: int) -> str:
    """The one short message: which session is told, and what to do; the notices themselves come as
    always (a hook's context, a tool result), so nothing here is delivered twice."""
    what = "a session you rely on has" if count == 1 else f"{count} sessions you rely on have"
    return (
        f"sessionwatch: {what} changed since you last looked (you are {session_key}). Reconcile before "
        "acting: call session_status (sessionwatch), or go on, and the notice arrives with your next tool result."
    )


def digest(text: str) -> str:
    try:  # the builtin module: importing hashlib would load OpenSSL
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - not CPython
        from hashlib import blake2b
    return blake2b(text.encode(), digest_size=12).hexdigest()


def write_json(path: Any, value: object) -> None:
    """Replace ``path`` atomically (a reader sees the old or the new file, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    os.replace(tmp, path)


class PushState:
    """The ids already pushed for one session (at most one push per notice, across restarts)."""

    def __init__(self, where: str, session_key: str) -> None:
        name = digest(where + "\0" + session_key)
        self.path = state_dir() / "push" / f"{name}.json"

    def load(self) -> set[int]:
        try:
            ids = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return {i for i in ids if isinstance(i, int)} if isinstance(ids, list) else set()

    def save(self, ids: set[int]) -> None:
        write_json(self.path, sorted(ids))


class Pusher:
    """Peeks the session's queue every ``interval`` seconds in a daemon thread; pushes what is new.

    ``session()`` is the session this server serves (None while it does not know yet); ``peek(key)``
    its pending entries; ``handed_out(key)`` the ids a hook has handed to the session and not yet seen
    acknowledged; ``gone(key, pid)`` reports an address found gone."""

    def __init__(
        self,
        channel: Channel,
        where: str,
        session: Callable[[], str | None],
        peek: Callable[[str], Sequence[Any]],
        handed_out: Callable[[str], set[int]],
        gone: Callable[[str, int | None], object] | None = None,
        *,
        interval: float = POLL_S,
    ) -> None:
        self.channel, self.where, self.session = channel, where, session
        self.peek, self.handed_out, self.gone = peek, handed_out, gone
        self.interval = interval
        self.pushed = 0  # messages written (tests and logs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sessionwatch-push", daemon=True)

    def start(self) -> Pusher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def once(self) -> bool:
        """One look; False when the address is gone (stop pushing)."""
        key = self.session()
        if key is None:
            return True  # nothing registered for this server yet
        try:
            pending = {int(e["id"]) for e in self.peek(key)}
            handed = self.handed_out(key)
        except Exception as exc:  # noqa: BLE001 - a failed read pushes nothing; the next look tries again
            log.debug("push: reading the notices of %s failed: %s", key, exc)
            return True
        state = PushState(self.where, key)
        done = state.load()
        # a notice a hook of this session has just handed over is the session's already: a push would
        # only start a turn for what the running one has (the hook's answer state lists it until the ack)
        new = pending - done - handed
        if new:
            inbox = self.channel.inbox(key)
            if inbox is None:
                return True
            try:
                inbox.send(push_text(key, len(new)))
            except NotYet as exc:
                log.debug("push: %s", exc)
                return True
            except Gone as exc:
                log.info("push: %s is gone (%s): no more pushes for %s", inbox.path, exc, key)
                self._dropped(key, inbox)
                return False
            except OSError as exc:  # a full or slow address: the next look tries again
                log.warning("push: writing to %s failed: %s", inbox.path, exc)
                return True
            self.pushed += 1
            log.info("push: told %s of %d new notice(s)", key, len(new))
        if new or done - pending:
            state.save((done | new) & pending)  # what left the queue can never be pushed again
        return True

    def _dropped(self, key: str, inbox: Inbox) -> None:
        """A gone address: forgotten, and reported (its process has ended)."""
        try:
            self.channel.forget(key)
        except OSError as exc:
            log.warning("push: forgetting %s's address failed: %s", key, exc)
        if self.gone is None:
            return
        try:
            self.gone(key, inbox.pid)
        except Exception as exc:  # noqa: BLE001 - the lost timer still sees it after the limit
            log.warning("push: reporting %s's host gone failed: %s", key, exc)

    def _run(self) -> None:
        # the first look one interval after the start: the session's first hooks hand out what was
        # pending when it started, and the look after them sees it as the session's already
        while not self._stop.wait(self.interval):
            if not self.once():
                return


def push_enabled() -> bool:
    return os.environ.get(PUSH_ENV, "1") != "0"


def push_interval() -> float:
    """``$SESSIONWATCH_PUSH_INTERVAL`` seconds (0.1 to 60), else one second."""
    try:
        value = float(os.environ.get(INTERVAL_ENV) or POLL_S)
    except ValueError:
        return POLL_S
    return min(60.0, max(0.1, value)) if value == value else POLL_S  # NaN: the default
