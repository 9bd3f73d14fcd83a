"""Push into a Codex TUI session, and how a Codex MCP server learns which session it serves.

**The push.** A Codex TUI runs its threads in an app-server daemon (``daemon.py``) that takes a second
client. The session's hooks, run by that daemon, register where the session runs (``register``: its
thread, the daemon's socket and pid) in the state folder; the session's MCP server pushes through it
(``CodexInbox``): one ``turn/steer`` of the turn the daemon says is in progress, or one ``turn/start``
of an idle thread, whose text tells the agent to reconcile. ``codex exec`` runs its hooks
itself, with no daemon: it registers nothing, and its notices wait for the next hook.

**Which session.** Codex passes its MCP servers nothing that names the session (a few environment
variables), and runs one server per thread. Installed without ``--session`` the server learns it late:

- from each tool call, whose ``_meta`` names the thread (``threadId``; ``x-codex-turn-metadata`` says
  whether it is a subagent's): ``agent:<agent>:codex:<thread>`` or ``agent:<agent>:subagent:<thread>``,
  the keys the hooks give the same thread (``session_of_call``);
- before any call, for the push: from the registrations of its daemon's sessions (the daemon is this
  server's parent and ran their hooks), one that no other live server has claimed (``unclaimed_session``;
  with several, the thread created nearest this server's start: Codex starts a thread's servers with it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..push import HOST_ENV, Channel, Gone, Inbox, NotYet, digest, write_json
from ..session_keys import agent_of_key, host_id, key_of, session_agent, subagent_key
from ..state_folder import state_dir
from . import process
from .daemon import Client, control_socket, running_turn
from .room import HOOK

HOST = HOOK.name
STARTED = time.time()  # this process's start, near enough: a server starts with its thread


def _registration(session_key: str) -> Path:
    return state_dir() / "push" / f"codex-{digest(session_key)}.json"


def _claim(session_key: str) -> Path:
    return _registration(session_key).with_suffix(".claim")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def thread_time(thread_id: str) -> float | None:
    """When a Codex thread was created (its id is a UUIDv7: the first 48 bits are the Unix time in ms)."""
    digits = thread_id.replace("-", "")[:12]
    try:
        return int(digits, 16) / 1000 if len(digits) == 12 else None
    except ValueError:
        return None


class CodexInbox(Inbox):
    """The registered thread's daemon: a steer of the turn in progress, or a turn of its own when idle."""

    path = "codex app-server"

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key

    def send(self, text: str) -> None:
        where = _read(_registration(self.session_key))
        if where is None or not where.get("threadId") or not where.get("socket"):
            raise NotYet("no hook of the session registered its thread yet")
        self.path = str(where["socket"])
        server = where.get("server")
        self.pid = server if isinstance(server, int) else None
        thread = str(where["threadId"])
        words = [{"type": "text", "text": text}]
        with Client(self.path) as daemon:
            for _ in range(3):  # a turn that ends (or starts) between the look and the write: look again
                turn = running_turn(daemon, thread)
                if turn is not None:  # busy: into the running turn, after its current tool output
                    answer = daemon.request("turn/steer", {"threadId": thread, "expectedTurnId": turn, "input": words})
                else:  # idle: a turn of its own (never a second turn beside a running one)
                    answer = daemon.request("turn/start", {"threadId": thread, "input": words})
                if "error" not in answer:
                    return
        raise Gone(f"the daemon does not take thread {thread}: {answer['error']}")


class CodexChannel(Channel):
    host = HOST
    binds_late = True

    def serves(self) -> bool:
        return os.environ.get(HOST_ENV) == HOST

    def inbox(self, session_key: str) -> Inbox | None:
        return CodexInbox(session_key)

    def session_of_call(self, meta: Mapping[str, Any] | None, agent: str | None) -> str | None:
        if not isinstance(meta, Mapping):
            return None
        turn = meta.get("x-codex-turn-metadata")
        turn = turn if isinstance(turn, Mapping) else {}
        thread = host_id(meta.get("threadId") or turn.get("thread_id"))
        if thread is None:
            return None
        name = session_agent(agent, {})  # --agent, else this server's folder: Codex starts it in the session's
        session = host_id(turn.get("session_id")) or thread
        if turn.get("thread_source") == "subagent" or session != thread:
            return subagent_key(name, thread)  # as the hooks name a subagent: by its thread (their agent_id)
        return key_of(name, HOOK.catalog, thread)

    def unclaimed_session(self, agent: str | None) -> str | None:
        name = session_agent(agent, {})
        parent = os.getppid()
        found: list[tuple[float, str]] = []
        folder = state_dir() / "push"
        try:
            paths = sorted(folder.glob("codex-*.json"))
        except OSError:
            return None
        for path in paths:
            where = _read(path)
            key = where.get("sessionKey") if where is not None else None
            if where is None or not isinstance(key, str) or where.get("server") != parent:
                continue
            if agent_of_key(key) != name:
                continue  # another project's session in the same daemon
            holder = _read(path.with_suffix(".claim"))
            if holder is not None and holder.get("pid") != os.getpid() and _alive(holder.get("pid")):
                continue
            born = thread_time(str(where.get("threadId") or ""))
            found.append((abs((born if born is not None else 0.0) - STARTED), key))
        for _, key in sorted(found):
            if self._take(key):
                return key
        return None

    def _take(self, session_key: str) -> bool:
        """Claim the session for this server; False when another live server holds it."""
        path = _claim(session_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            holder = _read(path)
            if holder is not None and holder.get("pid") != os.getpid() and _alive(holder.get("pid")):
                return False
            write_json(path, {"pid": os.getpid()})  # its server is gone: ours now
            return True
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid()}, f)
        return True

    def release(self, session_key: str) -> None:
        path = _claim(session_key)
        holder = _read(path)
        if holder is not None and holder.get("pid") == os.getpid():
            path.unlink(missing_ok=True)

    def register(self, session_key: str, data: Mapping[str, Any], event: str, host_pid: int, at: int) -> None:
        """Only a hook a TUI's daemon runs (``codex exec`` has no daemon to push through), while it listens.
        A hook that started before the one registered last writes nothing (their writes race, after the
        answers): the daemon the latest hook ran under stays."""
        thread = host_id(data.get("session_id"))
        sock = control_socket()
        if thread is None or not sock.exists() or not process.is_daemon(host_pid):
            return
        path = _registration(session_key)
        before = _read(path)
        if before is not None and isinstance(before.get("at"), int) and before["at"] > at:
            return
        write_json(
            path,
            {
                "sessionKey": session_key,
                "threadId": thread,
                "socket": str(sock),
                "server": host_pid,  # the daemon: it runs the session's hooks and MCP servers
                "at": at,
            },
        )

    def forget(self, session_key: str) -> None:
        _registration(session_key).unlink(missing_ok=True)
        _claim(session_key).unlink(missing_ok=True)


CHANNEL = CodexChannel()
