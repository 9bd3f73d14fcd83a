"""Incremental scan of a local JSONL transcript from a byte-offset marker (Claude and Codex files).

Per tick: one ``stat``; nothing more when the file did not grow and is still the same file. Otherwise
classify the complete rows after the marker, one window (1 MiB) in memory at a time, for as long as
the scan's time budget lasts (at least one window per file); a trailing partial row waits for the next
tick. A row longer than the window is classified in pieces with bounded memory, its parser state carried
in the marker (``{"offset", "row": {"start", "state"}}``), so it never blocks the cursor and no byte is
skipped unclassified.

File identity. The marker also records which file it belongs to (``"file"``: device, inode, a hash of
the first bytes and one of the bytes just before the offset, and a CRC-32 of the whole scanned prefix).
The same inode grown past the marker, with the same first bytes and the same bytes before the offset,
continues. A new inode continues only when it begins with exactly the scanned prefix (a sync tool or an
editor wrote the old content plus more): that is checked by re-reading the prefix. Anything else (a
truncated file, a rewrite, a different file) is rescanned from the start, every prompt in it new but
the ones reported before: the marker keeps fingerprints (time and text) of the last 32 reported prompts.

Thread context. A Codex prompt is a person's only in a turn a person started, and never in a subagent's
thread: rows before it say so (``hosts/codex/rows.CodexThread``). What the rows before the offset said rides
in the marker (``"thread"``), so it survives between ticks and restarts; a rescan from the start begins
afresh, and a marker without it (from before contexts existed) has it read from the file once
(``file_context``).

Outcomes: a missing file or a path that is no longer a regular file is ``missing``; any other error
is inconclusive (None).
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
import time
import zlib
from typing import Any, TypeGuard

from ..hosts.transcripts.rows import RowRules, RowStream, ThreadContext
from ..hosts.transcripts.verdict import Verdict, is_external, parse_timestamp
from .file_context import context_at
from .probes import ACTIVITY, Outcome, Probe, missing
from .tail import complete_end, pread_full

EDGE = 4096  # bytes hashed at each end of the scanned prefix
PREFIX_CHUNK = 1 << 20  # re-reading a prefix (adoption, a replaced file) one MiB at a time
REPORTED = 32  # fingerprints of the most recent reported prompts kept in the marker ("seen")


def marker_offset(marker: dict[str, Any]) -> int | None:
    value = marker.get("offset", marker.get("size"))
    if not _is_uint(value):
        return None
    return value


def _is_uint(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 - 1


def _edge_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _edges(fd: int, offset: int) -> tuple[str, str]:
    """Hashes of the first and of the last (up to EDGE) bytes of [0, offset)."""
    n = min(EDGE, offset)
    return _edge_hash(pread_full(fd, n, 0)), _edge_hash(pread_full(fd, n, offset - n))


def prefix_crc(fd: int, end: int) -> int | None:
    """CRC-32 of [0, end), read a chunk at a time; None when the file ends first."""
    crc = 0
    pos = 0
    while pos < end:
        chunk = pread_full(fd, min(PREFIX_CHUNK, end - pos), pos)
        if not chunk:
            return None
        crc = zlib.crc32(chunk, crc)
        pos += len(chunk)
    return crc


def file_identity(fd: int, st: os.stat_result, offset: int, crc: int) -> dict[str, Any]:
    head, tail = _edges(fd, offset)
    return {"dev": st.st_dev, "ino": st.st_ino, "head": head, "tail": tail, "crc": crc}


def _identity_of(marker: dict[str, Any]) -> dict[str, Any] | None:
    fid = marker.get("file")
    if (
        isinstance(fid, dict)
        and all(_is_uint(fid.get(k)) for k in ("dev", "ino", "crc"))
        and isinstance(fid.get("head"), str)
        and isinstance(fid.get("tail"), str)
    ):
        return fid
    return None


def baseline(path: str, rules: RowRules | None = None) -> dict[str, Any]:
    """The adoption baseline: just past the last complete row, with the file's identity (and, for a
    catalog that has one, the thread context there). Raises OSError.

    It reads the file once (the CRC of everything before the baseline)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise IsADirectoryError(path)
        offset = complete_end(fd, st.st_size)
        crc = prefix_crc(fd, offset)
        if crc is None:
            raise OSError(f"{path} shrank while it was read")
        out: dict[str, Any] = {"offset": offset, "file": file_identity(fd, st, offset, crc)}
        if rules is not None and rules.has_context:
            out["thread"] = context_at(fd, offset, rules)
        return out
    finally:
        os.close(fd)


def prompt_fingerprint(v: Verdict) -> str:
    """Which prompt a row is, whatever its bytes: its time and its text (or the text's digest)."""
    if v.text is not None:
        text = v.text
    elif v.parts is not None:
        text = " ".join(p for p in v.parts if p)
    else:
        text = v.text_digest or v.joined_digest or ""
    return hashlib.blake2b(f"{v.timestamp}\0{text}".encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class _Tally:
    """Counts the human turns of a scan, and remembers the last REPORTED of them.

    On a rescan from the start (``rescan``), a prompt already reported is not counted again: a rewrite
    that kept or reformatted old rows never repeats them."""

    def __init__(self, probe: Probe, seen: list[str], rescan: bool) -> None:
        self.probe = probe
        self.turns = 0
        self.latest: int | None = None
        self.seen = seen
        self.skip = set(seen) if rescan else None
        self.repeated = 0
        self.last: str | None = None  # the fingerprint of the newest prompt counted

    def add(self, v: Verdict) -> None:
        if not v.human or not is_external(v, self.probe.own()):
            return
        fp = prompt_fingerprint(v)
        if self.skip is not None and fp in self.skip:
            self.repeated += 1
            return
        self.turns += 1
        self.last = fp
        self.seen.append(fp)
        if len(self.seen) > REPORTED:
            del self.seen[0]
        ts = parse_timestamp(v.timestamp)
        if ts is not None and (self.latest is None or ts > self.latest):
            self.latest = ts


def _seen_of(marker: dict[str, Any]) -> list[str]:
    seen = marker.get("seen")
    if isinstance(seen, list):
        return [x for x in seen if isinstance(x, str) and len(x) <= 32][-REPORTED:]
    return []


def scan_file(
    path: str, marker: dict[str, Any], rules: RowRules, probe: Probe, window: int, deadline: float | None = None
) -> Outcome | None:
    """One file's scan: one window, then more while ``time.monotonic()`` is before ``deadline``."""
    offset = marker_offset(marker)
    if offset is None:
        return None
    fid = _identity_of(marker)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return missing("file not found")
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return missing("not a regular file")
    if st.st_size == offset and (fid is None or (st.st_dev, st.st_ino) == (fid["dev"], fid["ino"])):
        return None  # the same file, not grown: one stat
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        fst = os.fstat(fd)
        if not stat_mod.S_ISREG(fst.st_mode):
            return None  # replaced between stat and open: decide next tick
        size = fst.st_size
        if fid is None and deadline is not None and time.monotonic() >= deadline:
            # A marker from before file identities, and no time left to read its prefix: scan on as
            # before, and learn the identity in a later tick.
            crc, restart = None, None
        else:
            crc, restart = _continuity(fd, fst, size, offset, fid)
            if crc is None:
                return None  # the file changed under the check: decide next tick
        row = marker.get("row")
        if restart is not None:
            offset, crc, row = 0, 0, None
        if size == offset and restart is None:
            if crc is None or fid is None or (fst.st_dev, fst.st_ino) == (fid["dev"], fid["ino"]):
                return None
            # the same content under a new inode: remember the new identity, nothing to classify
            return Outcome(
                ACTIVITY,
                next_marker={**_without_file(marker), "file": file_identity(fd, fst, offset, crc)},
                note="replaced by a file with the same content",
            )
        thread, learned = _thread_of(fd, marker, rules, restart is None)
        seen = _seen_of(marker)
        # A rescan from the start may take several ticks: until it passes what the file held when it
        # began ("rescanTo"), prompts reported before are not counted again.
        rescan_to = size if restart is not None else marker.get("rescanTo")
        if not _is_uint(rescan_to):
            rescan_to = None
        tally = _Tally(probe, seen, rescan_to is not None)
        out = _scan_windows(fd, fst, size, offset, crc, row, rules, tally, window, deadline, thread)
        if out is None and restart is not None:
            # nothing complete in the new content yet: still remember the restart
            out = Outcome(ACTIVITY, next_marker={"offset": 0, "file": file_identity(fd, fst, 0, 0)})
        if out is None and learned:
            out = Outcome(ACTIVITY, next_marker=dict(marker))  # keep what was read: no need to read it again
        if out is not None and out.next_marker is not None:
            if rules.has_context:
                out.next_marker["thread"] = thread.to_state()  # after exactly the rows before its offset
            if seen and "seen" not in out.next_marker:
                out.next_marker["seen"] = seen
            if rescan_to is not None and out.next_marker.get("offset", 0) < rescan_to:
                out.next_marker["rescanTo"] = rescan_to
        if restart is not None and out is not None:
            out.note = restart if out.note is None else f"{restart}; {out.note}"
    finally:
        os.close(fd)
    return out


def _thread_of(fd: int, marker: dict[str, Any], rules: RowRules, resume: bool) -> tuple[ThreadContext, bool]:
    """The context to judge rows with, and whether it had to be read from the file (a marker from before
    contexts). ``resume`` False: the scan starts again from the first row, with a fresh context."""
    if not resume or not rules.has_context:
        return rules.thread(), False
    saved = marker.get("thread")
    if isinstance(saved, dict):
        return rules.thread(saved), False
    row = marker.get("row")
    at = row.get("start") if isinstance(row, dict) else None
    if not _is_uint(at):
        at = marker_offset(marker) or 0
    return rules.thread(context_at(fd, at, rules)), True


def _without_file(marker: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in marker.items() if k != "file"}


def _continuity(
    fd: int, st: os.stat_result, size: int, offset: int, fid: dict[str, Any] | None
) -> tuple[int | None, str | None]:
    """(CRC of the scanned prefix, None) when the file still begins with what was scanned; else
    (0, why) to rescan from the start. (None, None) when the file shrank during the check."""
    same_inode = fid is not None and (st.st_dev, st.st_ino) == (fid["dev"], fid["ino"])
    if size < offset:
        return 0, "rewritten: shorter than the marker, rescanned from the start"
    if fid is None:
        # A marker from before file identities: trust the offset once, and learn the file.
        return prefix_crc(fd, offset), None
    if _edges(fd, offset) != (fid["head"], fid["tail"]):
        return 0, (
            "rewritten: the scanned bytes changed, rescanned from the start"
            if same_inode
            else "replaced by a different file, rescanned from the start"
        )
    if same_inode:
        return fid["crc"], None  # appended to, as transcripts are: the edges are enough
    crc = prefix_crc(fd, offset)  # a new inode: it must begin with exactly the scanned prefix
    if crc is None:
        return None, None
    if crc != fid["crc"]:
        return 0, "replaced by a different file, rescanned from the start"
    return crc, None


def _scan_windows(
    fd: int,
    st: os.stat_result,
    size: int,
    offset: int,
    crc: int | None,
    row: Any,
    rules: RowRules,
    tally: _Tally,
    window: int,
    deadline: float | None,
    thread: ThreadContext,
) -> Outcome | None:
    """Classify complete rows from ``offset``, a window at a time, until the file, a partial row or the
    time budget ends. Only one window is held in memory. ``crc`` None: the identity is not known yet.
    Every complete row's verdict goes through ``thread``, in file order."""
    pos = offset
    note: str | None = None
    stream: RowStream | None = None
    row_start = 0
    if isinstance(row, dict):  # finishing an oversized row
        try:
            stream = rules.stream(row.get("state"))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            start = row.get("start")
            if _is_uint(start) and start <= offset:
                # an unreadable saved state (say, from another version): classify the row again
                fid = _file_at(fd, st, start)
                if fid is None:
                    return None
                return Outcome(ACTIVITY, next_marker={"offset": start, "file": fid}, note="oversized row restarted")
            return None
        saved_start = row.get("start")
        row_start = saved_start if _is_uint(saved_start) else offset
    windows = 0
    could = rules.could_be_human
    classify = rules.classify
    judge = thread.judge
    # every verdict through the context; Claude has none (a call per row saved: most of its rows parse)
    add = tally.add if not rules.has_context else lambda v: tally.add(judge(v))
    while pos < size and (windows == 0 or (deadline is not None and time.monotonic() < deadline)):
        data = pread_full(fd, min(size - pos, window), pos)
        if not data:
            break
        windows += 1
        used = 0
        if stream is not None:
            nl = data.find(b"\n")
            if nl < 0:
                stream.feed(data)
                if crc is not None:
                    crc = zlib.crc32(data, crc)
                pos += len(data)
                note = "oversized row"
                continue
            stream.feed(data[:nl])
            add(stream.finish())
            if row_start == 0:
                thread.seen_head()
            stream = None
            used = nl + 1
            note = "oversized row"
        end = data.rfind(b"\n") + 1
        if end > used:
            rows = data[used : end - 1]
            if pos + used == 0 and rules.has_context:  # the first row, parsed whatever its bytes: whose thread
                first, _, rows = rows.partition(b"\n")
                add(rules.classify_head(first))
                thread.seen_head()
            for line in rows.split(b"\n"):
                if could(line):
                    add(classify(line))
            used = end
        elif used == 0:
            if len(data) < window:
                break  # a row still being written
            stream = rules.stream()  # a row longer than the window starts here
            stream.feed(data)
            row_start = pos
            used = len(data)
            note = "oversized row"
        if crc is not None:
            crc = zlib.crc32(memoryview(data)[:used], crc)
        pos += used
    if pos == offset and stream is None:
        return None  # nothing complete yet
    if crc is not None:
        nxt: dict[str, Any] = {"offset": pos, "file": file_identity(fd, st, pos, crc)}
        tail = nxt["file"]["tail"]
    else:
        nxt = {"offset": pos}
        tail = _edges(fd, pos)[1]
    if stream is not None:
        nxt["row"] = {"start": row_start, "state": stream.to_state()}
    if tally.seen:
        nxt["seen"] = tally.seen
    if tally.repeated:
        repeated = f"{tally.repeated} prompt(s) reported before, not counted again"
        note = repeated if note is None else f"{note}; {repeated}"
    out = Outcome(ACTIVITY, human_turns=tally.turns, next_marker=nxt, note=note)
    if tally.turns:
        out.occurred_at = tally.latest if tally.latest is not None else st.st_mtime_ns // 1_000_000
        # The activity is named by the newest prompt it counted (its time and text), not by how far the
        # scan read: two scans of one link at once (a gateway's nudge and another process's tick) that
        # found the same prompts record it once, however much more of the file one of them read; a scan
        # that found a newer prompt is new activity. A retry (the marker did not move) gives the same id.
        out.dedupe_id = f"prompt:{tally.last}" if tally.last else f"{pos}:{tail}"
    return out


def _file_at(fd: int, st: os.stat_result, offset: int) -> dict[str, Any] | None:
    crc = prefix_crc(fd, offset)
    return None if crc is None else file_identity(fd, st, offset, crc)
