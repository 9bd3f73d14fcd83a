"""The hook's quick answer: "nothing to do", decided with the standard library alone.

A host runs the hook before every prompt and after every tool call, and nearly every run has nothing
to deliver. Loading the engine and the store costs several times what Python's own start does, so
before any of that this module settles the common case from the input and one read-only SQLite query:

- an event the hook neither answers nor writes down: nothing to do, whatever the store holds (the same
  rules as ``run.run``); an event that changes the session's lifecycle state (a prompt, the end of a
  turn, a start, a wait, an end, a subagent's start or stop) always takes the full run;
- a local SQLite store, the session named by ``--session`` or ``$SESSIONWATCH_SESSION`` (an agent key)
  or, without one, the session already linked to this very thread (``host_sessions.resolve``; the
  subagent's own key for an event from inside one), no earlier answer waiting to be acknowledged (no
  answer file, ``delivery.AnswerState``), and the session's queue head showing nothing appended since
  the last drain (``queue_heads.appended <= drained``: no entry is live, see the schema's queue notes),
  and its lifecycle state ``working`` or never reported (a tool call then writes nothing).

When the session has an answer to acknowledge or a queue that may hold live entries, and the event is
one the host takes an answer for, the verdict is ``DELIVER``: ``quick_delivery.py`` reads the queue
and prints what the full run would, or declines. Anything else, or any doubt (another store, a gateway,
a read that fails, ``--log-level debug``), is ``FULL``: the full run decides. It never writes and never
creates a file (``log`` appends a line to the hook's log for the callers that settle a run here).
"""

from __future__ import annotations

import json
import os
import sys

from ..hosts import identity
from ..hosts.state_folder import state_path

MAX_INPUT_BYTES = 1 << 20  # twin: run.MAX_INPUT_BYTES
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")  # twin: hosts.HOSTS[*].events
# twin: hosts.HOSTS[*].observes: always the full run
OBSERVED = ("SubagentStart", "SubagentStop", "PermissionRequest", "Notification", "SessionEnd")
CATALOG = identity.CATALOG


class Input:
    """The hook's stdin, read once: the bytes (at most MAX_INPUT_BYTES + 1) and, for the full run, a
    stream that gives them again, then whatever is still unread."""

    def __init__(self, stdin: object) -> None:
        self._stdin = stdin
        try:
            self.raw: bytes = stdin.read(MAX_INPUT_BYTES + 1)  # type: ignore[attr-defined]
        except (OSError, ValueError, AttributeError):
            self.raw = b""
            self._stdin = None
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        if self._pos < len(self.raw):
            end = len(self.raw) if n < 0 else self._pos + n
            out = self.raw[self._pos : end]
            self._pos += len(out)
            return out
        return self._stdin.read(n) if self._stdin is not None else b""  # type: ignore[attr-defined]


def _answer_file(where: str, key: str, agent: str | None) -> str:
    # twin: delivery.AnswerState (the same digest, so both find the same file)
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - not CPython
        from hashlib import blake2b
    digest = blake2b(f"{where}\0{agent or ''}\0{key}".encode(), digest_size=12).hexdigest()
    return os.path.join(state_path(), "hooks", f"{digest}.json")


def _store_url(opts: dict[str, str]) -> str:
    # twin: run._store_url (the same choice; only SQLite files are handled here)
    return (
        opts.get("store")
        or os.environ.get("SESSIONWATCH_STORE")
        or "sqlite:///" + os.path.join(_state_dir_for_store(), "sessionwatch", "sessionwatch.db")
    )


def _state_dir_for_store() -> str:
    # twin: store.default_sqlite_path (the store's folder does not follow SESSIONWATCH_STATE_DIR)
    return os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")


QUIET, WRITES, FULL, DELIVER = "quiet", "writes", "full", "deliver"


class Plan:  # a plain class: importing dataclasses or typing is a noticeable part of a hook run
    """What ``plan`` found. ``DELIVER``: an answer to acknowledge or entries that may be live, for a run
    that answers the event (``quick_delivery.py`` decides from the queue itself); ``writes``: a write is
    due after the answer whatever is delivered (a lifecycle report, a nudge)."""

    __slots__ = ("agent", "answer_file", "event", "host", "key", "path", "url", "verdict", "writes")

    def __init__(self, verdict: str, **found: object) -> None:
        self.verdict = verdict
        self.host = self.event = self.url = self.path = self.key = self.answer_file = ""
        self.agent: str | None = None
        self.writes = False
        for name, value in found.items():
            setattr(self, name, value)


def nothing_to_do(opts: dict[str, str], raw: bytes) -> bool:
    """True when the full run would certainly deliver nothing, acknowledge nothing and write nothing."""
    return decide(opts, raw) == QUIET


def decide(opts: dict[str, str], raw: bytes) -> str:
    """``QUIET``: nothing at all to do. ``WRITES``: nothing to deliver or acknowledge, but a write is due
    (a lifecycle report, the session's creation, a nudge), which may run after the host has its answer
    (``fast.py`` runs it detached, never delivering). ``DELIVER``: see ``Plan``. ``FULL``: the full run,
    now."""
    return plan(opts, raw).verdict


def plan(opts: dict[str, str], raw: bytes) -> Plan:
    """The decision, with what the quick delivery needs to go on from it."""
    host = opts.get("host")
    if host not in CATALOG or opts.get("log_level") == "debug" or len(raw) > MAX_INPUT_BYTES:
        return Plan(FULL)
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return Plan(FULL)  # the full run says why in the log
    if not isinstance(data, dict):
        return Plan(FULL)
    event = data.get("hook_event_name")
    if event in OBSERVED:
        return Plan(FULL)  # rare, and a subagent's start must be written before its stop
    if event not in EVENTS:
        return Plan(QUIET)
    adapter = identity.ROOMS[host].hook
    if event == "UserPromptSubmit" and adapter.tells_sender:
        return Plan(FULL)  # who sent the prompt is written before the host writes it (host_sessions.told_prompt)
    if opts.get("gateway") or os.environ.get("SESSIONWATCH_GATEWAY"):
        return Plan(FULL)
    key = opts.get("session") or os.environ.get("SESSIONWATCH_SESSION") or ""
    agent = opts.get("agent") or os.environ.get("SESSIONWATCH_AGENT") or None
    thread = identity.host_id(data.get("session_id")) if not key else None
    if not key and thread is None:
        return Plan(FULL)  # found by the transcript's path, if at all: the full run
    if key and not key.startswith("agent:"):
        return Plan(FULL)  # a bare key with an agent: the full run
    url = _store_url(opts)
    if not url.startswith("sqlite:///"):
        return Plan(FULL)
    path = url[len("sqlite:///") :]
    if not path or path == ":memory:":
        return Plan(FULL)
    try:
        if os.path.getsize(path) == 0:
            return Plan(QUIET)  # no store yet: the full run would find nothing either (and creates none)
    except OSError:
        return Plan(QUIET)  # no store file at all: likewise
    if event == "Stop" and data.get("stop_hook_active") is True:
        return Plan(WRITES)  # never blocked twice in a row (run.run): only the end of the turn to write
    try:
        import sqlite3

        conn = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True, timeout=0.5)
    except Exception:  # noqa: BLE001 - any doubt: the full run decides
        return Plan(FULL)
    adopting = False
    try:
        if not key:  # the session linked to this thread (run.run: the adoption link), else its own key
            linked = conn.execute(
                "SELECT session_key, agent_id FROM upstream_links WHERE catalog_id = ? AND thread_id = ? LIMIT 2",
                (CATALOG[host], thread),
            ).fetchall()
            if len(linked) > 1:
                return Plan(FULL)
            if linked:
                key, agent = linked[0]
            else:  # not adopted yet: the run adopts it, and its own key may have notices already
                key = identity.zero_config_key(host, agent, data) or ""
                agent, adopting = None, True
                if not key:
                    return Plan(FULL)
        sub = identity.host_id(data.get("agent_id"))
        if sub is not None:  # from inside a subagent: its own notices (host_sessions.child_key)
            key = identity.subagent_key(identity.agent_of_key(key) or agent or "main", sub)
        writes = event != "PostToolUse" or adopting
        if not writes and adapter.subagent_ends(event, data):
            writes = True  # a subagent ended without a SubagentStop (a failed one): its end to write
        if not writes:
            state = conn.execute("SELECT state, seen_at FROM session_states WHERE session_key = ?", (key,)).fetchone()
            # a tool ran after a wait or the end of a turn (it works again), or the last word is old
            # enough that the lost timer could take a long busy turn for a silent one: to be written
            writes = state is not None and (state[0] != "working" or state[1] < _heartbeat_due())
        if event in adapter.events:  # an event the host takes an answer for (others deliver nothing)
            answer_file = _answer_file(url, key, agent)
            head = conn.execute("SELECT appended, drained FROM queue_heads WHERE session_key = ?", (key,)).fetchone()
            if os.path.exists(answer_file) or (head is not None and head[0] > head[1]):
                if adopting:
                    return Plan(FULL)  # the session is created first: the full run
                found = {"host": host, "event": event, "url": url, "path": path, "key": key, "agent": agent}
                return Plan(DELIVER, answer_file=answer_file, writes=writes, **found)
        return Plan(WRITES if writes else QUIET)
    except Exception:  # noqa: BLE001 - an old or foreign schema, a locked file: the full run decides
        return Plan(FULL)
    finally:
        conn.close()


LOG_MAX_BYTES = 1 << 20  # twin: run.LOG_MAX_BYTES
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}  # twin: logging's


def log(opts: dict[str, str], level: str, message: str) -> None:
    """One line in the hook's log, as ``run.setup_logging`` writes it (the same file, format, rotation and
    level: INFO and up unless ``--log-level`` says otherwise), without loading ``logging``. Best-effort,
    as there."""
    chosen = opts.get("log_level") or "warning"
    if LEVELS[level] < LEVELS["INFO" if chosen == "warning" else chosen.upper()]:  # as fast.py sets it up
        return
    import time

    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
    line = f"{stamp} {level} sessionwatch.hook[{os.getpid()}]: {message}\n"
    target = opts.get("log_file")
    try:
        if target == "-":
            sys.stderr.write(line)
            return
        path = target or os.path.join(state_path(), "hooks.log")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            if os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except OSError:
            pass
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
    except Exception:  # noqa: BLE001 - no home folder, a file where the folder should be: no log line
        pass


def _heartbeat_due() -> int:
    """A working session heard from before this (ms) gets its tool call written: half the lost limit
    (twin: settings ``SESSIONWATCH_LOST_AFTER_MS``, default 600000)."""
    import time

    try:
        limit = int(os.environ.get("SESSIONWATCH_LOST_AFTER_MS") or 600_000)
    except ValueError:
        limit = 600_000
    return int(time.time() * 1000) - limit // 2


def _uri_path(path: str) -> str:
    """A filesystem path as the path part of a ``file:`` URI (``?`` and ``#`` would end it)."""
    out = os.path.abspath(os.path.expanduser(path))
    for ch, esc in (("%", "%25"), ("?", "%3F"), ("#", "%23")):
        out = out.replace(ch, esc)
    return out


def stdin() -> Input:
    return Input(getattr(sys.stdin, "buffer", None))
