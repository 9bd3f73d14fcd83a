"""A file's thread context at a row boundary, read from the file itself (see ``rows.ThreadContext``).

Needed where a scan starts past the rows that set it: an adoption's baseline, and a marker saved before
contexts existed. Both reads are bounded: the file's first row (a Codex rollout's ``session_meta``,
streamed when it is long) and, walking back from the offset, the rows up to the latest one that starts a
turn (``task_started``), at most ``WALK_BACK`` bytes back. On that walk a row longer than ``ROW_LIMIT``
is passed over unread (a ``task_started`` row is a few hundred bytes). When no turn start is found in
reach, the turn counts as unattributed (prompts in it count, as they did before attributions).
"""

from __future__ import annotations

from typing import Any

from ..hosts.transcripts.rows import RowRules
from ..hosts.transcripts.verdict import Verdict
from .tail import pread_full, rows_backward

WALK_BACK = 16 << 20
ROW_LIMIT = 1 << 20
HEAD_CHUNK = 1 << 20


def context_at(fd: int, offset: int, rules: RowRules) -> dict[str, Any]:
    """The saved state of ``rules``' context after the rows before ``offset`` (a row boundary)."""
    ctx = rules.thread()
    if offset <= 0:
        return ctx.to_state()
    head = first_row(fd, offset, rules)
    if head is not None:
        ctx.judge(head)
    ctx.seen_head()
    turn = latest_turn(fd, offset, rules)
    if turn is not None:
        ctx.judge(turn)
    return ctx.to_state()


def first_row(fd: int, offset: int, rules: RowRules) -> Verdict | None:
    """The verdict of the file's first row, when it ends before ``offset``."""
    pos = 0
    stream = None
    while pos < offset:
        chunk = pread_full(fd, min(HEAD_CHUNK, offset - pos), pos)
        if not chunk:
            return None
        nl = chunk.find(b"\n")
        if stream is None and nl >= 0:
            return rules.classify_head(chunk[:nl])
        if stream is None:
            stream = rules.stream()  # a first row longer than a chunk: bounded memory
        stream.feed(chunk if nl < 0 else chunk[:nl])
        if nl >= 0:
            return stream.finish()
        pos += len(chunk)
    return None


def latest_turn(fd: int, offset: int, rules: RowRules) -> Verdict | None:
    """The verdict of the latest row before ``offset`` that starts a turn, if one is in reach."""
    walked = 0
    for start, end in rows_backward(fd, offset):
        walked += end - start + 1
        if walked > WALK_BACK:
            return None
        if end - start > ROW_LIMIT:
            continue
        v = rules.classify(pread_full(fd, end - start, start))
        if v.fact is not None and v.fact.turn is not None:
            return v
    return None
