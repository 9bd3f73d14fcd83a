"""Reading one Pi session file from a cursor: which new entries are a person's.

A Pi session is a JSONL file: a ``session`` header line, then entries linked by ``id``/``parentId`` into a
tree (a branch is a new entry whose parent is an older one). Pi appends, and rewrites the whole file only
when it migrates an older format. Nothing in the file says who sent a prompt (the TUI, ``pi -p``, RPC and
an extension write the same line), so without the extension the rule is conservative:

- Only ``message`` entries count: a ``user`` message, or a ``bashExecution`` one (a ``!cmd`` typed in the
  TUI, whose output the model reads next; ``!!cmd`` stays out of the model's context and does not count).
  Assistant messages, tool results, custom messages and entries, compactions, branch summaries, labels,
  model changes: never.
- A prompt whose text is one the session itself sent (``own``: what sessionwatch delivered or the
  extension recorded) is not a person's.
- A prompt whose text matches one of the previous prompts on its own branch (up to ``RECENT``, found by
  walking ``parentId`` back) is a program repeating itself, not a person. A person who submits the same
  text again on another branch (``/tree``, edit and resend) is counted: that text is not an ancestor.

The cursor (a JSON dict, kept in the adoption link's marker) holds the byte offset just past the last
complete line read, the file's identity (device, inode, hashes of the first and the last bytes before
the offset), the newest entry time seen, and a bounded piece of the tree (the last ``NODES`` entries and
the last ``USERS`` prompts, as digests): enough to walk a new entry's branch back. A walk that leaves
the known piece falls back to the file's recent prompts, which is more conservative, never less.

A line longer than the window is never read whole: its first ``HEAD`` bytes decide (Pi writes
``type``, ``id``, ``parentId``, ``timestamp`` and the message's ``role`` first), the rest is skipped a
window at a time, across ticks if need be (``long`` in the cursor). Its text key is a digest of those
first bytes and its length, so it is never taken for one of the session's own (short) texts.

A rewrite (the file shorter than the offset, or its first or last bytes before the offset changed, or
another inode) rescans the file from the start: the tree is rebuilt, and an entry not newer than the
newest entry seen before is old, so a migration, which keeps every entry's time, reports nothing again.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat as stat_mod
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency
    import json

    _loads = json.loads

WINDOW = 1 << 20  # bytes read at a time
HEAD = 4096  # bytes of an oversized line that decide it; bytes hashed at each end of the scanned prefix
NODES = 128  # entries of the tree kept in the cursor
USERS = 64  # prompts kept in the cursor
RECENT = 50  # previous prompts on a branch a new prompt is compared with
_LONG_HEAD = re.compile(
    rb'^\{"type":"message","id":"([^"\\]{1,64})","parentId":(?:null|"([^"\\]{1,64})"),'
    rb'"timestamp":"([^"\\]{1,40})","message":\{"role":"([A-Za-z]{1,32})"'
)


def normalize(text: str) -> str:
    """Trim and collapse whitespace (the rule every host's self-echo test uses)."""
    return " ".join(text.split())


def text_key(text: str) -> str:
    return hashlib.blake2b(normalize(text).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _edge(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def parse_time(value: object) -> int | None:
    """An entry's ISO timestamp (or epoch ms) as epoch ms."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        return None
    try:
        dt = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return None
    return int((dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp() * 1000)


@dataclass(slots=True)
class Prompt:
    """A counted-or-not candidate: a user message or a ``!cmd``."""

    entry_id: str | None
    text: str | None  # None: an oversized line, known only by ``key``
    key: str
    at: int | None


@dataclass(slots=True)
class Scan:
    """What one scan found. ``cursor`` None: nothing to change (inconclusive, or the file is as it was)."""

    missing: bool = False
    turns: int = 0
    cursor: dict[str, Any] | None = None
    occurred_at: int | None = None
    dedupe_id: str | None = None
    note: str | None = None
    prompts: list[str] = field(default_factory=list)  # the counted prompts' texts (for tests and logs)


class Tree:
    """A bounded piece of the session's entry tree: ``nodes`` id -> parent id (the last NODES entries)
    and ``users`` id -> (text key, the nearest prompt above it; "?" when that was not known)."""

    def __init__(self, state: object = None) -> None:
        self.nodes: dict[str, str | None] = {}
        self.users: dict[str, tuple[str, str | None]] = {}
        if isinstance(state, dict):
            for item in state.get("nodes") or []:
                if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
                    self.nodes[item[0]] = item[1] if isinstance(item[1], str) else None
            for item in state.get("users") or []:
                if isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item[:2]):
                    self.users[item[0]] = (item[1], item[2] if isinstance(item[2], str) else None)

    def to_state(self) -> dict[str, Any]:
        return {
            "nodes": [[k, v] for k, v in self.nodes.items()],
            "users": [[k, d, p] for k, (d, p) in self.users.items()],
        }

    def _walk(self, parent: str | None) -> tuple[list[str], str | None, bool]:
        """The prompts on the branch above ``parent`` (newest first, at most RECENT), the nearest one's
        id ("?" when the walk lost the branch before finding one), and whether the walk is complete
        (it reached the root or RECENT prompts; not when it left the piece of the tree it knows)."""
        keys: list[str] = []
        nearest: str | None = None
        p = parent
        for _ in range(NODES + USERS + RECENT):  # bounded even on a cycle in a damaged file
            if p is None or len(keys) >= RECENT:
                return keys, nearest, True
            if p in self.users:
                key, up = self.users[p]
                nearest = p if nearest is None else nearest
                keys.append(key)
                if up == "?":
                    return keys, nearest, False
                p = up
            elif p in self.nodes:
                p = self.nodes[p]
            else:
                break
        return keys, nearest if nearest is not None else "?", False

    def earlier(self, parent: str | None) -> set[str]:
        """The text keys a new prompt under ``parent`` must not repeat: its branch's previous prompts, or,
        where the branch cannot be walked back far enough, those plus every prompt the cursor remembers."""
        keys, _, complete = self._walk(parent)
        return set(keys) if complete else set(keys) | {k for k, _ in self.users.values()}

    def add(self, entry_id: str | None, parent: str | None, key: str | None) -> None:
        if entry_id is None:
            return
        if key is not None:
            _, nearest, _ = self._walk(parent)
            self.users.pop(entry_id, None)
            self.users[entry_id] = (key, nearest)
            while len(self.users) > USERS:
                self.users.pop(next(iter(self.users)))
        else:
            self.nodes.pop(entry_id, None)
            self.nodes[entry_id] = parent
            while len(self.nodes) > NODES:
                self.nodes.pop(next(iter(self.nodes)))


def _message_prompt(entry: dict[str, Any]) -> Prompt | None:
    """The prompt an entry is, or None (not a user message nor a ``!cmd``)."""
    if entry.get("type") != "message":
        return None
    msg = entry.get("message")
    if not isinstance(msg, dict):
        return None
    role = msg.get("role")
    if role == "user":
        content = msg.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(
                str(c.get("text")) for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
            )
        else:
            return None
    elif role == "bashExecution":
        if msg.get("excludeFromContext") is True or not isinstance(msg.get("command"), str):
            return None  # !!cmd: the model never sees it
        text = "!" + msg["command"]
    else:
        return None
    eid = entry.get("id")
    return Prompt(eid if isinstance(eid, str) else None, text, text_key(text), parse_time(entry.get("timestamp")))


def _long_prompt(head: bytes, length: int) -> tuple[Prompt | None, str | None, str | None]:
    """(prompt or None, entry id, parent id) of an oversized line from its first bytes."""
    m = _LONG_HEAD.match(head)
    if m is None:
        return None, None, None
    eid, parent = m.group(1).decode(), m.group(2).decode() if m.group(2) else None
    if m.group(4) not in (b"user", b"bashExecution") or (
        m.group(4) == b"bashExecution" and b'"excludeFromContext":true' in head
    ):
        return None, eid, parent
    key = hashlib.blake2b(head + str(length).encode(), digest_size=8).hexdigest()
    return Prompt(eid, None, key, parse_time(m.group(3).decode())), eid, parent


class _Judge:
    """Decides each prompt against the tree, the session's own texts and (after a rewrite) the newest
    entry time seen before; counts what is a person's."""

    def __init__(self, tree: Tree, own: Callable[[], Iterable[str]], quiet_until: int | None) -> None:
        self.tree = tree
        self._load_own = own
        self._own: set[str] | None = None
        self.quiet_until = quiet_until
        self.turns = 0
        self.latest: int | None = None
        self.newest: int | None = None
        self.prompts: list[str] = []

    def own(self) -> set[str]:
        if self._own is None:
            self._own = {n for n in (normalize(t) for t in self._load_own()) if n}
        return self._own

    def entry(self, entry_id: str | None, parent: str | None, at: int | None, prompt: Prompt | None) -> None:
        if at is not None and (self.newest is None or at > self.newest):
            self.newest = at
        if prompt is None:
            self.tree.add(entry_id, parent, None)
            return
        old = self.quiet_until is not None and (at is None or at <= self.quiet_until)
        repeated = prompt.key in self.tree.earlier(parent)
        mine = prompt.text is not None and normalize(prompt.text) in self.own()
        self.tree.add(entry_id, parent, prompt.key)
        if old or repeated or mine:
            return
        self.turns += 1
        self.prompts.append(prompt.text if prompt.text is not None else "")
        if at is not None and (self.latest is None or at > self.latest):
            self.latest = at

    def line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            entry = _loads(raw)
        except (ValueError, RecursionError):
            return  # not JSON: not a person
        if not isinstance(entry, dict) or entry.get("type") == "session":
            return
        eid, parent = entry.get("id"), entry.get("parentId")
        self.entry(
            eid if isinstance(eid, str) else None,
            parent if isinstance(parent, str) else None,
            parse_time(entry.get("timestamp")),
            _message_prompt(entry),
        )

    def long_line(self, head: bytes, length: int) -> None:
        prompt, eid, parent = _long_prompt(head, length)
        self.entry(eid, parent, prompt.at if prompt else None, prompt)


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _identity(fd: int, st: os.stat_result, offset: int) -> dict[str, Any]:
    n = min(HEAD, offset)
    return {
        "dev": st.st_dev,
        "ino": st.st_ino,
        "n": n,
        "head": _edge(_pread(fd, n, 0)),
        "tail": _edge(_pread(fd, n, offset - n)),
    }


def _uint(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53 else None


def _rewritten(fd: int, st: os.stat_result, offset: int, fid: object) -> str | None:
    """Why the file is not the one the cursor read (rescan it), or None."""
    if st.st_size < offset:
        return "rewritten: shorter than the cursor, rescanned from the start"
    if not isinstance(fid, dict):
        return None
    n = _uint(fid.get("n"))
    if n is None or n != min(HEAD, offset):
        return "the cursor's file identity is unreadable, rescanned from the start"
    if _edge(_pread(fd, n, 0)) != fid.get("head") or _edge(_pread(fd, n, offset - n)) != fid.get("tail"):
        same = (st.st_dev, st.st_ino) == (fid.get("dev"), fid.get("ino"))
        return (
            "rewritten: the bytes read before changed (a format migration?), rescanned from the start"
            if same
            else "replaced by another file, rescanned from the start"
        )
    return None


def baseline(path: str, window: int = WINDOW) -> dict[str, Any]:
    """The adoption cursor: past the last complete line, with the tree read from the whole file (one
    window at a time). Raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise IsADirectoryError(path)
        judge = _Judge(Tree(), list, None)
        offset, long = _read(fd, st.st_size, 0, None, judge, window, None)
        cursor = _cursor(fd, st, offset, judge, long, None)
        return cursor
    finally:
        os.close(fd)


def _cursor(
    fd: int, st: os.stat_result, offset: int, judge: _Judge, long: dict[str, int] | None, quiet: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": offset, "file": _identity(fd, st, offset), "tree": judge.tree.to_state()}
    newest = max((x for x in (judge.newest, quiet) if x is not None), default=None)
    if newest is not None:
        out["newest"] = newest
    if long is not None:
        out["long"] = long
    return out


def _read(
    fd: int,
    size: int,
    offset: int,
    long: dict[str, int] | None,
    judge: _Judge,
    window: int,
    deadline: float | None,
) -> tuple[int, dict[str, int] | None]:
    """Judge complete lines from ``offset`` a window at a time until the file, a partial line or the time
    ends (at least one window). Returns the new offset and the oversized line still being skipped."""
    pos = offset
    windows = 0
    while pos < size and (windows == 0 or deadline is None or time.monotonic() < deadline):
        windows += 1
        if long is not None:  # skipping the rest of an oversized line
            chunk = _pread(fd, min(window, size - long["pos"]), long["pos"])
            nl = chunk.find(b"\n")
            if nl < 0:
                long = {"start": long["start"], "pos": long["pos"] + len(chunk)}
                if not chunk:
                    break
                continue
            end = long["pos"] + nl
            judge.long_line(_pread(fd, HEAD, long["start"]), end - long["start"])
            pos, long = end + 1, None
            continue
        chunk = _pread(fd, min(window, size - pos), pos)
        if not chunk:
            break
        last = chunk.rfind(b"\n")
        if last < 0:
            if len(chunk) < window:
                break  # a line still being written: next tick
            long = {"start": pos, "pos": pos + len(chunk)}  # longer than a window: decided by its head
            continue
        for raw in chunk[:last].split(b"\n"):
            judge.line(raw)
        pos += last + 1
    return pos, long


def scan(
    path: str,
    cursor: dict[str, Any],
    own: Callable[[], Iterable[str]],
    *,
    window: int = WINDOW,
    deadline: float | None = None,
) -> Scan:
    """One look at a session file from ``cursor``. ``own``: the session's own recent texts (read only when
    a prompt is found). Never raises for the file: gone is ``missing``, unreadable is inconclusive."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Scan(missing=True, note="file not found")
    except OSError:
        return Scan()
    if not stat_mod.S_ISREG(st.st_mode):
        return Scan(missing=True, note="not a regular file")
    offset = _uint(cursor.get("offset")) or 0
    fid = cursor.get("file")
    raw_long = cursor.get("long")
    long = (
        {"start": raw_long["start"], "pos": raw_long["pos"]}
        if isinstance(raw_long, dict) and _uint(raw_long.get("start")) is not None and _uint(raw_long.get("pos"))
        else None
    )
    same_inode = isinstance(fid, dict) and (st.st_dev, st.st_ino) == (fid.get("dev"), fid.get("ino"))
    if st.st_size == (long["pos"] if long else offset) and same_inode:
        return Scan()  # not grown: one stat
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return Scan()
    try:
        fst = os.fstat(fd)
        if not stat_mod.S_ISREG(fst.st_mode):
            return Scan()
        why = _rewritten(fd, fst, offset, fid)  # another inode with the same bytes first: a copy, read on
        newest = _uint(cursor.get("newest"))
        quiet = _uint(cursor.get("quiet"))
        if why is not None:
            offset, long, tree, quiet = 0, None, Tree(), newest
        else:
            tree = Tree(cursor.get("tree"))
        judge = _Judge(tree, own, quiet)
        end, long = _read(fd, fst.st_size, offset, long, judge, window, deadline)
        out = _cursor(fd, fst, end, judge, long, newest)
        if quiet is not None and end < fst.st_size:
            out["quiet"] = quiet  # a rescan that takes several ticks stays quiet about old entries
        result = Scan(turns=judge.turns, cursor=out, note=why, prompts=judge.prompts)
        if judge.turns:
            result.occurred_at = judge.latest if judge.latest is not None else int(fst.st_mtime_ns // 1_000_000)
            result.dedupe_id = f"{end}:{out['file']['tail']}"
        return result
    finally:
        os.close(fd)
