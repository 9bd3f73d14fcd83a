"""Incremental scan of a local JSONL transcript from a byte-offset marker (Claude and Codex files).

Per tick: one ``stat``; nothing more when the file did not grow. Otherwise read at most one window
(1 MiB) after the marker and classify the complete rows in it; a trailing partial row waits for the
next tick. A row longer than the window is classified in pieces with bounded memory, its parser state
carried in the marker (``{"offset", "row": {"start", "state"}}``), so it never blocks the cursor and no
byte is skipped unclassified.

Outcomes: a missing file or a path that is no longer a regular file is ``missing``; any other error
is inconclusive (None); a file shorter than the marker was rewritten: the marker re-baselines at its
last complete row, recording nothing.
"""

from __future__ import annotations

import os
import stat as stat_mod
from typing import Any

from .probes import ACTIVITY, Outcome, Probe, missing
from .rows import RowRules
from .tail import complete_end, pread_full
from .verdict import Verdict, is_external, parse_timestamp


def marker_offset(marker: dict[str, Any]) -> int | None:
    value = marker.get("offset", marker.get("size"))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**53 - 1:
        return None
    return value


def baseline(path: str) -> dict[str, Any]:
    """The adoption baseline: just past the last complete row. Raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise IsADirectoryError(path)
        return {"offset": complete_end(fd, st.st_size)}
    finally:
        os.close(fd)


class _Tally:
    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.turns = 0
        self.latest: int | None = None

    def add(self, v: Verdict) -> None:
        if not v.human or not is_external(v, self.probe.own()):
            return
        self.turns += 1
        ts = parse_timestamp(v.timestamp)
        if ts is not None and (self.latest is None or ts > self.latest):
            self.latest = ts


def scan_file(path: str, marker: dict[str, Any], rules: RowRules, probe: Probe, window: int) -> Outcome | None:
    offset = marker_offset(marker)
    if offset is None:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return missing("file not found")
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return missing("not a regular file")
    if st.st_size == offset:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        fst = os.fstat(fd)
        if not stat_mod.S_ISREG(fst.st_mode):
            return None  # replaced between stat and open: decide next tick
        size = fst.st_size
        if size < offset:
            # Rewritten or truncated: what came before cannot be told apart from what is new.
            return Outcome(ACTIVITY, next_marker={"offset": complete_end(fd, size)}, note="rewritten")
        if size == offset:
            return None
        data = pread_full(fd, min(size - offset, window), offset)
    finally:
        os.close(fd)
    if not data:
        return None
    return _classify_window(data, offset, marker, rules, probe, window, st.st_mtime_ns // 1_000_000)


def _classify_window(data: bytes, offset: int, marker: dict[str, Any], rules: RowRules, probe: Probe,
                     window: int, mtime_ms: int) -> Outcome | None:
    tally = _Tally(probe)
    pos = 0
    row = marker.get("row")
    note = None
    if isinstance(row, dict):  # finishing an oversized row
        try:
            stream = rules.stream(row.get("state"))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            start = row.get("start")
            if isinstance(start, int) and not isinstance(start, bool) and 0 <= start <= offset:
                # an unreadable saved state (say, from another version): classify the row again
                return Outcome(ACTIVITY, next_marker={"offset": start}, note="oversized row restarted")
            return None
        nl = data.find(b"\n")
        if nl < 0:
            stream.feed(data)
            return Outcome(ACTIVITY, next_marker={"offset": offset + len(data),
                                                  "row": {"start": row.get("start"), "state": stream.to_state()}},
                           note="oversized row")
        stream.feed(data[:nl])
        tally.add(stream.finish())
        pos = nl + 1
        note = "oversized row"
    end = data.rfind(b"\n") + 1
    if end <= pos:
        if pos == 0:
            if len(data) < window:
                return None  # a row still being written
            stream = rules.stream()  # a row longer than the window starts here
            stream.feed(data)
            return Outcome(ACTIVITY, next_marker={"offset": offset + len(data),
                                                  "row": {"start": offset, "state": stream.to_state()}},
                           note="oversized row")
    else:
        could = rules.could_be_human
        classify = rules.classify
        for line in data[pos:end - 1].split(b"\n"):
            if could(line):
                tally.add(classify(line))
        pos = end
    nxt = offset + pos
    out = Outcome(ACTIVITY, human_turns=tally.turns, next_marker={"offset": nxt}, note=note)
    if tally.turns:
        out.occurred_at = tally.latest if tally.latest is not None else mtime_ms
        out.dedupe_id = str(nxt)
    return out
