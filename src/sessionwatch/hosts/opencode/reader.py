"""OpenCode sessions as a catalog: list them, find one, and scan it for a person's prompts.

**The cursor.** OpenCode rewrites its ``message`` and ``part`` rows during a turn (a part appears empty,
then full), but every change also goes into the append-only ``event`` table with a per-session ``seq``.
The marker is ``{seq, seen, t}``: the last event read, the ids of the last ``SEEN`` user messages
already decided, and the creation time of the newest of them. A scan reads only the new events' types
and message ids (SQLite's ``json_extract``, so a huge tool output never reaches Python), then the
current rows of the user messages they name. A message decided once is never decided again, however
often its rows are rewritten; one created before ``t`` and not in ``seen`` is old history, not new.

**What counts.** A message of ``role: user`` in a session that is no subagent's (``parent_id``), with
text in a part that is not ``synthetic`` and no ``compaction`` part, is a candidate. Then, with
sessionwatch's plugin installed, the plugin's record of who sent it decides (``sources.py``); without
it, or for a prompt the plugin did not see (OpenCode's replay of a pending prompt after a compaction),
the conservative rule: a text equal to one of the session's previous ``RECENT`` prompts, or to one of
sessionwatch's own texts for the session, is not a person's. A user message without its text yet is
waited for (the cursor stays before it) while it is younger than ``SETTLE_MS``; one whose only text is
synthetic (OpenCode's own) is decided at once, as no person's.

Every read is read-only and short; a locked database or a schema without the expected tables is
inconclusive (None), and only a database that answers without the session says it is gone.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import database, sources
from .database import Unreadable

log = logging.getLogger("sessionwatch.upstream")

CATALOG_ID = "opencode"
UPSTREAM_KIND = "opencode-cli"
SEEN = 64  # user messages remembered as decided
RECENT = 50  # earlier prompts of the session a new one is compared with (as OpenClaw does)
EVENTS_PER_SCAN = 5000  # a longer backlog continues on the next tick
SETTLE_MS = 30_000  # how long a user message without its text (or its plugin record) is waited for
TEXT_CHARS = 65_536  # of a part's text, enough to compare prompts
TITLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    directory: str | None
    title: str | None
    parent_id: str | None
    created_at: int
    updated_at: int


@dataclass(slots=True)
class Found:
    """A scan's result: ``turns`` prompts a person sent since the marker (0: the cursor only moved)."""

    turns: int
    next_marker: dict[str, Any]
    occurred_at: int | None = None
    dedupe_id: str | None = None
    note: str | None = None


GONE = "gone"  # the database answers and has no such session (any more)


def normalize(text: str) -> str:
    """Whitespace collapsed, and the double quotes ``opencode run`` puts around an argument with a space
    taken off, so the same prompt compares equal however it was sent."""
    out = " ".join(text.split())
    if len(out) >= 2 and out[0] == '"' and out[-1] == '"':
        out = " ".join(out[1:-1].split())
    return out


class OpenCodeCatalog:
    catalog_id = CATALOG_ID
    upstream_kind = UPSTREAM_KIND

    def __init__(self, db_path: str | os.PathLike[str] | None = None) -> None:
        self._explicit = Path(db_path) if db_path is not None else None
        self._warned: set[str] = set()

    @property
    def db_path(self) -> Path:
        # read each time: the environment decides where OpenCode keeps it unless configured
        return self._explicit if self._explicit is not None else database.default_path()

    # -- opening -----------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        """A connection to a database with the tables the reader needs; Unreadable (or FileNotFoundError)
        otherwise."""
        conn = database.connect(self.db_path)
        try:
            missing = database.check_schema(conn)
        except Unreadable:
            conn.close()
            raise
        if missing:
            conn.close()
            what = ", ".join(missing)
            if what not in self._warned:  # once per process: the schema will not come back by itself
                self._warned.add(what)
                log.warning("OpenCode's database %s lacks %s: its sessions are not read", self.db_path, what)
            raise Unreadable(f"OpenCode's database lacks {what} (a release this version does not know)")
        return conn

    # -- listing and finding -----------------------------------------------------------------------
    def list_threads(self, folder: str | None = None) -> list[dict[str, Any]]:
        """Top-level sessions (no subagent's), newest first; only those of ``folder`` when given. No
        database yet: none. Raises Unreadable when it cannot be read now."""
        try:
            conn = self._open()
        except FileNotFoundError:
            return []
        try:
            sql = (
                "SELECT id, directory, title, time_updated FROM session WHERE parent_id IS NULL"
                + (" AND directory = ?" if folder is not None else "")
                + " ORDER BY time_updated DESC, id LIMIT 1000"
            )
            rows = conn.execute(sql, (folder,) if folder is not None else ()).fetchall()
        except sqlite3.Error as exc:
            raise Unreadable(f"listing OpenCode sessions failed: {exc}") from None
        finally:
            conn.close()
        out = []
        for sid, directory, title, updated in rows:
            info: dict[str, Any] = {"catalogId": CATALOG_ID, "threadId": sid, "updatedAt": int(updated or 0)}
            if isinstance(directory, str):
                info["cwd"] = directory
            if isinstance(title, str) and title:
                info["title"] = title[:TITLE_CHARS]
            out.append(info)
        return out

    def locate(self, session_id: str) -> Session | None:
        """The session, or None when the database (or the session) is not there."""
        try:
            conn = self._open()
        except FileNotFoundError:
            return None
        try:
            return _session(conn, session_id)
        finally:
            conn.close()

    def baseline(self, session_id: str) -> dict[str, Any]:
        """The marker of an adoption: past every event and message the session has now.

        A session adopted as it starts (the plugin's ``SessionStart`` comes with the session's first
        prompt, not before it, and may find that prompt stored already) also keeps where its messages
        begin (``from``): the first scan starts there when the plugin's records say who sent the prompts,
        so the prompt that started the session is judged like any other (a person's first prompt in the
        TUI counts, as it does for the other hosts). Without the plugin's records it is history, as for
        any adoption."""
        conn = self._open()
        try:
            seq = conn.execute("SELECT max(seq) FROM event WHERE aggregate_id = ?", (session_id,)).fetchone()[0]
            t = conn.execute("SELECT max(time_created) FROM message WHERE session_id = ?", (session_id,)).fetchone()[0]
            session = _session(conn, session_id)
            first = conn.execute(
                "SELECT min(seq) FROM event WHERE aggregate_id = ? AND type LIKE 'message.%'", (session_id,)
            ).fetchone()[0]
        except sqlite3.Error as exc:
            raise Unreadable(f"reading session {session_id} failed: {exc}") from None
        finally:
            conn.close()
        marker: dict[str, Any] = {"seq": int(seq) if seq is not None else -1, "seen": [], "t": int(t or 0)}
        young = session is not None and int(time.time() * 1000) - session.created_at < SETTLE_MS
        if young and first is not None:
            marker["from"] = int(first) - 1
        return marker

    # -- the scan ----------------------------------------------------------------------------------
    def scan(
        self, session_id: str, marker: dict[str, Any], own_texts: Callable[[], Iterable[str]]
    ) -> Found | str | None:
        """What is new in the session since ``marker``: a Found, GONE, or None (inconclusive: nothing to
        do this tick)."""
        try:
            conn = self._open()
        except FileNotFoundError:
            return GONE  # no database at all: nothing of the session is left (three misses decide)
        except Unreadable as exc:
            log.info("OpenCode session %s not read this tick: %s", session_id, exc)
            return None
        try:
            return self._scan(conn, session_id, marker, own_texts)
        except sqlite3.Error as exc:  # locked, busy, a row shape this version does not know
            log.info("OpenCode session %s not read this tick: %s", session_id, exc)
            return None
        finally:
            conn.close()

    def _scan(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        marker: dict[str, Any],
        own_texts: Callable[[], Iterable[str]],
    ) -> Found | str | None:
        session = _session(conn, session_id)
        if session is None:
            return GONE
        seq = _int(marker.get("seq"), -1)
        seen = [s for s in marker.get("seen") or [] if isinstance(s, str)][-SEEN:]
        newest_t = _int(marker.get("t"), 0)
        start = marker.get("from")
        if isinstance(start, int) and -1 <= start < seq and sources.read(self.db_path, session_id) is not None:
            seq, newest_t = start, 0  # adopted as it started: its first prompts too (see baseline)
        last = conn.execute("SELECT max(seq) FROM event WHERE aggregate_id = ?", (session_id,)).fetchone()[0]
        note = None
        if last is not None and last < seq:  # the events were renumbered (a restored database): read again
            seq, note = -1, f"the session's events restart below the marker ({last} < {seq}): read again"
        if last is None or last <= seq:
            return None if note is None else Found(0, {"seq": -1, "seen": seen, "t": newest_t}, note=note)
        rows = conn.execute(
            "SELECT seq, coalesce(json_extract(data, '$.info.id'), json_extract(data, '$.part.messageID')),"
            " json_extract(data, '$.info.role')"
            " FROM event WHERE aggregate_id = ? AND seq > ? AND type LIKE 'message.%' ORDER BY seq LIMIT ?",
            (session_id, seq, EVENTS_PER_SCAN),
        ).fetchall()
        full = len(rows) == EVENTS_PER_SCAN
        end = rows[-1][0] if full else int(last)
        first_seen: dict[str, int] = {}  # message id -> the seq of its first new event
        for ev_seq, mid, _role in rows:
            if isinstance(mid, str) and mid not in first_seen and mid not in seen:
                first_seen[mid] = int(ev_seq)
        messages = _user_messages(conn, session_id, list(first_seen))
        now = int(time.time() * 1000)
        evidence = sources.read(self.db_path, session_id) if messages else None
        own: set[str] | None = None
        turns, occurred, dedupe = 0, None, None
        for mid in first_seen:
            msg = messages.get(mid)
            if msg is None:
                continue  # an assistant's message, or one deleted since
            created, texts, compaction, written = msg
            if created < newest_t and mid not in seen:
                seen.append(mid)  # history from before the cursor: rewritten, not new
                continue
            # written: a text part is there (a synthetic one only is OpenCode's own, never a person's)
            settled = written or compaction
            if settled and evidence is not None and mid not in evidence and texts and not compaction:
                settled = False  # the plugin writes its record a moment after OpenCode stores the prompt
            if not settled and now - created < SETTLE_MS:
                end = min(end, first_seen[mid] - 1)  # read it again next tick, from here
                break
            seen.append(mid)
            newest_t = max(newest_t, created)
            if compaction or not texts or session.parent_id is not None:
                continue
            text = normalize(" ".join(texts))
            if not text:
                continue
            verdict = evidence.get(mid) if evidence is not None else None
            if verdict == sources.PROGRAM:
                continue
            if own is None:
                own = {n for n in (normalize(t) for t in own_texts()) if n}
            if text in own:
                continue  # one of sessionwatch's own texts for the session, whoever typed it
            if verdict != sources.PERSON and text in _recent(conn, session_id, created, mid):
                continue  # the conservative rule: no plugin, a prompt it did not see (a replay), a server's
            turns += 1
            if occurred is None or created >= occurred:
                occurred, dedupe = created, mid
        next_marker = {"seq": end, "seen": seen[-SEEN:], "t": newest_t}
        return Found(turns, next_marker, occurred, dedupe, note)


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _session(conn: sqlite3.Connection, session_id: str) -> Session | None:
    row = conn.execute(
        "SELECT id, directory, title, parent_id, time_created, time_updated FROM session WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        return None
    return Session(row[0], row[1], row[2], row[3], int(row[4] or 0), int(row[5] or 0))


def _user_messages(
    conn: sqlite3.Connection, session_id: str, ids: list[str]
) -> dict[str, tuple[int, list[str], bool, bool]]:
    """id -> (created, texts of the parts a person could have written, has a compaction part, has any
    text part with text: synthetic ones too), for the user messages among ``ids``."""
    out: dict[str, tuple[int, list[str], bool, bool]] = {}
    for start in range(0, len(ids), 500):  # SQLite's variable limit
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        found = conn.execute(
            f"SELECT id, time_created FROM message WHERE session_id = ? AND id IN ({marks})"
            " AND json_extract(data, '$.role') = 'user'",
            (session_id, *chunk),
        ).fetchall()
        for mid, created in found:
            out[mid] = (int(created or 0), [], False, False)
        if not found:
            continue
        for mid, kind, synthetic, text in conn.execute(
            "SELECT message_id, json_extract(data, '$.type'), json_extract(data, '$.synthetic'),"
            f" substr(json_extract(data, '$.text'), 1, {TEXT_CHARS})"
            f" FROM part WHERE session_id = ? AND message_id IN ({marks}) ORDER BY id",
            (session_id, *chunk),
        ):
            if mid not in out:
                continue
            created, texts, compaction, written = out[mid]
            if kind == "compaction":
                out[mid] = (created, texts, True, written)
            elif kind == "text" and isinstance(text, str) and text.strip():
                if not synthetic:
                    texts.append(text)
                out[mid] = (created, texts, compaction, True)
    return out


def _recent(conn: sqlite3.Connection, session_id: str, before: int, mid: str) -> set[str]:
    """The session's previous ``RECENT`` prompts (normalized), the one at hand left out."""
    rows = conn.execute(
        "SELECT id FROM message WHERE session_id = ? AND time_created <= ? AND id != ?"
        " AND json_extract(data, '$.role') = 'user' ORDER BY time_created DESC, id DESC LIMIT ?",
        (session_id, before, mid, RECENT),
    ).fetchall()
    earlier = _user_messages(conn, session_id, [r[0] for r in rows])
    return {normalize(" ".join(texts)) for _, texts, _, _ in earlier.values() if texts}
