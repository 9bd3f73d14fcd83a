"""The hook's quick delivery: a notice printed with the standard library, the writes left to a detached run.

When ``quick.plan`` finds an answer to acknowledge or a queue that may hold live entries (a local SQLite
store, the session known), this gives the host the very bytes the full run would (``run._deliver``)
without loading the engine:

1. take the session's lock (``delivery.AnswerState.exclusive``: the same file, the same wait);
2. read the last answer's state: an answered one is *held* (not printed again) and is acknowledged
   afterwards, by the detached run; the full run acknowledges it first, then peeks, which prints the
   same entries unless the acknowledgment changes the queue (below);
3. read the live queue in one read-only query (``store/sqlite/queue_model.entries``: the chain of notice
   slots and the plain entries, oldest first) and render each line as the engine does
   (``notices.notice_template``, ``notices.format_line``);
4. save the ids as unanswered, print, flush, mark them answered (the at-least-once rule of delivery.py).
   The held ids stay in the file next to the new ones: a run that comes before the acknowledgment holds
   them too, and acknowledging them twice changes nothing.

It declines (``None``: nothing printed, nothing written, the full run decides) whenever the full run
could print something else: the event would block a turn (``Stop``) or start one (``SessionStart``); the
queue is full (the withheld line, and notices the cap evicted, queued again as it empties); acknowledging
the held answer would queue a notice again (its session changed since; ``queue.py``'s reopen) ; a session
key no notice shows as it is (``keys.shown``); a dashboard link in the notices, or a data setting in the
environment; a schema other than the one this reads. Never creates a file but the answer state and the
lock, and writes nothing to the store.
"""

from __future__ import annotations

import json
import os
import sys
import time

from .quick import Plan

SCHEMA = 11  # twin: the newest SQLite migration (store/migrations/sqlite); another schema: the full run
CAP_DEFAULT = 20  # twin: settings.Settings.queue_cap, when the store holds none
# twin: settings.DATA_SETTINGS[*].env and settings.PUBLIC_URL_ENV: set, they change what the full run reads
# or how it words a notice (or make it fail to open the store)
FULL_RUN_ENV = (
    "SESSIONWATCH_QUEUE_CAP",
    "SESSIONWATCH_RETENTION_MS",
    "SESSIONWATCH_MAX_EVENTS",
    "SESSIONWATCH_WAKE_COALESCE_MS",
    "SESSIONWATCH_PUBLIC_URL",
)
PRINTS = ("UserPromptSubmit", "PostToolUse")  # the events it may print for; others print through the full run
MAX_KEY = 512  # twin: keys.MAX_KEY_LENGTH
LOCK_WAIT_S = 0.25  # twin: delivery.AnswerState.exclusive's wait_s
CONTEXT_PREFIX = "session-state:"  # twin: notices.CONTEXT_PREFIX

# twin: store/sqlite/queue_model.py::entries (_LIVE_SLOTS and _LIVE_GENERIC, one statement here), plus
# whether acknowledging a slot's notice reopens it (queue.py::_ack: material past what it notified).
# ?1 the session, ?2 the queue cap, ?3 the walk's bound (cap + 1).
_LIVE_C = "c.queued_idx > h.drained AND h.appended - c.queued_idx < ?2"
ENTRIES = (
    "WITH RECURSIVE chain(target, idx, id, prev, ls, ts, live, n, reopens) AS ("
    " SELECT c.target, c.queued_idx, c.queued_id, c.queued_prev, c.queued_ls, c.queued_ts, " + _LIVE_C + ", 1,"
    " c.material > c.notified FROM queue_heads h JOIN slot_keys k ON k.id = h.last_slot"
    " JOIN cursors c ON c.target = k.target AND c.watcher = h.session_key WHERE h.session_key = ?1"
    " UNION ALL"
    " SELECT c.target, c.queued_idx, c.queued_id, c.queued_prev, c.queued_ls, c.queued_ts, " + _LIVE_C + ","
    " w.n + 1, c.material > c.notified FROM chain w JOIN slot_keys k ON k.id = w.prev"
    " JOIN cursors c ON c.target = k.target AND c.watcher = ?1"
    " JOIN queue_heads h ON h.session_key = ?1 WHERE w.live AND w.n < ?3 AND c.queued_id < w.id)"
    " SELECT idx, id, target, NULL, ls, ts, reopens FROM chain WHERE live"
    " UNION ALL"
    " SELECT e.idx, e.eid, NULL, e.context_key, e.text, e.ts, 0 FROM system_events e JOIN queue_heads h"
    " ON h.session_key = e.session_key WHERE e.session_key = ?1 AND e.idx > h.drained AND h.appended - e.idx < ?2"
    " ORDER BY 1"
)


# one live entry: (idx, id, target or None, context key, text or the notice's last_seen, ts, reopens)
Row = tuple[int, int, str | None, str | None, object, int, int]


class Delivered:  # a plain class (see quick.Plan)
    """What the quick delivery did: ``acknowledge``, the held answer's ids (for the detached run);
    ``printed``, the ids it gave the host now (an empty list: nothing printed)."""

    def __init__(self, acknowledge: list[int], printed: list[int], lost: str | None = None) -> None:
        self.acknowledge = acknowledge
        self.printed = printed
        self.lost = lost  # why the answer did not reach the host

    def logged(self, plan: Plan) -> tuple[str, str] | None:
        """The full run's log line for the delivery (run._deliver), with its level; None: none."""
        if self.lost is not None:
            why = f"the answer was not taken ({self.lost}); it is given again next run"
            return "WARNING", f"{plan.event} hook for {plan.key}: {why}"
        if self.printed:
            return "INFO", f"{plan.event} hook for {plan.key} delivered {len(self.printed)} notice(s): {self.printed}"
        return None


def deliver(plan: Plan) -> Delivered | None:
    """Print what is pending for ``plan``'s session as the full run would; None: the full run decides
    (nothing was printed or written)."""
    parts = plan.key.split(":")
    if len(parts) < 3 or not all(parts) or len(plan.key) > MAX_KEY or not _plain_key(plan.key):
        return None  # a key the engine refuses, or one a notice would show escaped: the full run
    if plan.agent is not None and plan.agent != parts[1]:
        return None  # the engine refuses an agent that is not the key's own: the full run says so
    if any(os.environ.get(name) for name in FULL_RUN_ENV):
        return None
    import fcntl

    hooks = os.path.dirname(plan.answer_file)
    name = os.path.basename(plan.answer_file)
    try:
        locks = os.path.join(os.path.dirname(hooks), "hook-locks")
        os.makedirs(locks, exist_ok=True)
        fd = os.open(os.path.join(locks, name[: -len(".json")] + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:  # as AnswerState.exclusive: after the wait, on unlocked (a notice may come twice, never lost)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
        return _deliver(plan)
    finally:
        os.close(fd)  # releases the lock


def _deliver(plan: Plan) -> Delivered | None:
    prev = _load(plan.answer_file)
    held = prev[0] if prev is not None and prev[1] else []
    queued = entries(plan)
    if queued is None:
        return None
    held_set = set(held)
    for _, eid, target, context_key, _, _, reopens in queued:
        if eid in held_set and (reopens or (target is None and str(context_key).lower().startswith(CONTEXT_PREFIX))):
            return None  # its acknowledgment queues a notice the full run would print now
    new = [e for e in queued if e[1] not in held_set]
    if not new:
        return Delivered(held, [])
    if plan.event not in PRINTS:
        return None
    lines = rendered(new)
    if lines is None:
        return None
    from ..hosts.registry import ROOMS

    answer = ROOMS[plan.host].hook.answer(plan.event, "\n".join(lines))
    ids = [int(e[1]) for e in new]
    state = [*held, *ids]
    if not _save(plan, state, answered=False):
        return None  # no state, no print: the full run (which says why)
    try:
        sys.stdout.write(answer)
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError) as exc:  # the host is gone: they stay unanswered, given again
        _discard()
        return Delivered(held, [], lost=str(exc))
    _save(plan, state, answered=True)
    return Delivered(held, ids)


def rendered(rows: list[Row]) -> list[str] | None:
    """Each entry's line as the engine words it (``system_events.entry_json``'s ``line``); None when one
    cannot be rendered here."""
    lines = []
    for _, _, target, _, text, ts, _ in rows:
        if not isinstance(ts, int) or not 0 <= ts < 253402300800000:  # beyond what format_timestamp writes
            return None
        if target is not None:
            text = (
                f'Session "{target}" changed (other actor). Reconcile before acting: '
                f'session_status sessionKey "{target}" changesSince {text}.'
            )  # twin: notices.notice_template (without a public URL), for a key shown as it is
        lines.append(_line(ts, str(text)))
    return lines


def entries(plan: Plan) -> list[Row] | None:
    """The live queue (idx, id, target or None, context key, text or the notice's last_seen, ts, reopens),
    oldest first; None when it cannot be read as the full run would (the full run then decides)."""
    import sqlite3

    from .quick import _uri_path

    try:
        conn = sqlite3.connect(f"file:{_uri_path(plan.path)}?mode=ro", uri=True, timeout=0.5)
    except Exception:  # noqa: BLE001 - any doubt: the full run decides
        return None
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()  # the migrations' number (connection.py)
        if version != SCHEMA:
            return None
        row = conn.execute("SELECT value FROM data_settings WHERE name = 'queue_cap'").fetchone()
        if row is None:
            return None  # an old store: the full run stores its settings first
        cap = int(row[0])
        rows = conn.execute(ENTRIES, (plan.key, cap, cap + 1)).fetchall()
    except Exception:  # noqa: BLE001 - a locked file, a foreign schema: the full run decides
        return None
    finally:
        conn.close()
    if len(rows) >= cap:
        return None  # a full queue: the withheld line, and what the cap evicted (engine/evicted.py)
    for row in rows:
        if row[2] is not None and not _plain_key(row[2]):
            return None
    return rows


def _plain_key(key: str) -> bool:
    """A key every text shows as it is (twin: keys.shown, which escapes whitespace, controls and the
    characters in keys._HIDING)."""
    for ch in key:
        o = ord(ch)
        if o < 33 or 127 <= o < 160 or ch.isspace() or o == 0x200B or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069:
            return False
    return True


def _line(ts_ms: int, text: str) -> str:
    """twin: notices.format_line (``System: [<ISO time, ms, Z>] <text>``, each further line ``System: ``)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ms // 1000)) + f".{ts_ms % 1000:03d}Z"
    first, *rest = text.split("\n")
    return "\n".join([f"System: [{stamp}] {first}", *(f"System: {line}" for line in rest)])


def _load(path: str) -> tuple[list[int], bool] | None:
    """twin: delivery.AnswerState.load: (ids, answered), or None for no state or an unreadable one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    ids = data.get("ids") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return None
    return ids, data.get("answered") is True


def _save(plan: Plan, ids: list[int], *, answered: bool) -> bool:
    """twin: delivery.AnswerState.save (the same file, replaced atomically)."""
    try:
        os.makedirs(os.path.dirname(plan.answer_file), exist_ok=True)
        tmp = f"{plan.answer_file[: -len('.json')]}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"sessionKey": plan.key, "ids": ids, "answered": answered}))
        os.replace(tmp, plan.answer_file)
    except OSError:
        return False
    return True


def _discard() -> None:
    """twin: run._discard: a dead stdout goes to the null device, so the exit code stays 0."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
