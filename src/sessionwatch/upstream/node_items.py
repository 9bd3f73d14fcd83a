"""The node protocol's items: a transcript read newest first, classified row by row.

An item is one complete, non-blank row: ``{id, kind, timestamp, text?}`` where ``kind`` is
``human_prompt`` or ``other`` and ``text`` (normalized) comes only with ``human_prompt``. The id is
``<byte offset>-<12 hex>``: the offset makes paging back a seek, the hash (over the row's first 4 KiB
and its length) keeps a rewritten file's rows from passing for old ones. Texts longer than 64 KiB, and
rows too long to hold (more than 1 MiB), carry digests for the self-echo check instead of full text.

A Codex prompt row is ``human_prompt`` only when its thread context says a person sent it (see
``hosts/codex/rows.py``): rows are read newest first, so a prompt waits for the older ``task_started`` of its
turn, on this page or, for the page's oldest prompts, further back in the file (``file_context``).

The same module turns a received item back into a :class:`Verdict` on the gateway side.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat as stat_mod
from typing import Any

from ..errors import InvalidArgument
from ..hosts.transcripts.normalize import digest_text
from ..hosts.transcripts.rows import RowRules
from ..hosts.transcripts.verdict import Verdict
from .file_context import first_row, latest_turn
from .tail import complete_end, pread_full, rows_backward

MAX_PAGE = 200
ROW_IN_MEMORY = 1 << 20
TEXT_LIMIT = 64 * 1024
_ITEM_ID = re.compile(r"(\d{1,16})-([0-9a-f]{12})")
HUMAN = "human_prompt"
OTHER = "other"


def item_id(start: int, head: bytes, length: int) -> str:
    h = hashlib.blake2b(head[:4096] + length.to_bytes(8, "big"), digest_size=6).hexdigest()
    return f"{start}-{h}"


def check_before(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str) or _ITEM_ID.fullmatch(value) is None:
        raise InvalidArgument(f"before must be an item id like '1234-0123456789ab', got {value!r}")
    return int(value.split("-", 1)[0])


def check_limit(value: object, default: int = 50) -> int:
    if value is None:
        return default
    try:
        n = int(str(value))
    except ValueError:
        raise InvalidArgument(f"limit must be an integer, got {value!r}") from None
    if n < 1:
        raise InvalidArgument(f"limit must be at least 1, got {n}")
    return min(n, MAX_PAGE)


def _echo(v: Verdict) -> dict[str, Any]:
    """Self-echo material for the wire: full text while small, digests beyond."""
    out: dict[str, Any] = {}
    if v.parts is not None:
        parts = [p for p in v.parts if p]
        text = " ".join(parts)
        if len(text) <= TEXT_LIMIT:
            out["text"] = text
            if len(parts) > 1:
                out["parts"] = parts
        else:
            out["text"] = text[:TEXT_LIMIT]
            out["textTruncated"] = True
            out["partDigests"] = [digest_text(p) for p in parts][:64]
            out["joinedDigest"] = digest_text(text)
            if len(parts) > 64:
                out["partsOverflow"] = True
    elif v.part_digests is not None or v.joined_digest is not None:
        out["text"] = v.text_prefix or ""
        out["textTruncated"] = True
        out["partDigests"] = list(v.part_digests or [])
        out["joinedDigest"] = v.joined_digest
        if v.parts_overflow:
            out["partsOverflow"] = True
    elif v.text is not None:
        if len(v.text) <= TEXT_LIMIT:
            out["text"] = v.text
        else:
            out["text"] = v.text[:TEXT_LIMIT]
            out["textTruncated"] = True
            out["textDigest"] = digest_text(v.text)
    else:
        out["text"] = v.text_prefix or ""
        out["textTruncated"] = True
        out["textDigest"] = v.text_digest
    return out


def verdict_from_item(item: dict[str, Any]) -> Verdict:
    """The gateway's view of a received item (only ``human_prompt`` items are human)."""
    if item.get("kind") != HUMAN:
        return Verdict(False)
    ts = item.get("timestamp") if isinstance(item.get("timestamp"), str) else None
    if isinstance(item.get("joinedDigest"), str) or isinstance(item.get("partDigests"), list):
        digests = [d for d in item.get("partDigests") or [] if isinstance(d, str)]
        return Verdict(
            True,
            timestamp=ts,
            part_digests=digests,
            joined_digest=item.get("joinedDigest"),
            parts_overflow=bool(item.get("partsOverflow")),
        )
    if isinstance(item.get("textDigest"), str):
        return Verdict(True, timestamp=ts, text_digest=item["textDigest"])
    parts = item.get("parts")
    if isinstance(parts, list) and all(isinstance(p, str) for p in parts):
        return Verdict(True, timestamp=ts, parts=list(parts))
    text = item.get("text")
    return Verdict(True, timestamp=ts, text=text if isinstance(text, str) else "")


def _classify_row(fd: int, start: int, end: int, rules: RowRules) -> tuple[Verdict, bytes] | None:
    length = end - start
    if length <= ROW_IN_MEMORY:
        data = pread_full(fd, length, start)
        if not data or data.isspace():
            return None
        return rules.classify(data), data[:4096]
    head = pread_full(fd, 4096, start)
    stream = rules.stream()
    pos = start
    while pos < end:
        chunk = pread_full(fd, min(ROW_IN_MEMORY, end - pos), pos)
        if not chunk:
            break
        stream.feed(chunk)
        pos += len(chunk)
    return stream.finish(), head


def _in_context(
    fd: int, rows: list[tuple[str, Verdict]], oldest: int, end: int, rules: RowRules
) -> list[tuple[str, Verdict]]:
    """The page's verdicts (newest first), each prompt judged by its thread context: the file's first
    row and its turn's start (on the page, or the latest before ``oldest``, the page's oldest row). The
    file is read for them only when the page holds a prompt."""
    if not any(v.human for _, v in rows):
        return rows
    head = first_row(fd, end, rules)
    out = list(rows)
    waiting: list[int] = []  # prompts newer than the nearest turn start seen so far

    def settle(turn: Verdict | None) -> None:
        ctx = rules.thread()
        for context_row in (head, turn):
            if context_row is not None:
                ctx.judge(context_row)
        for i in waiting:
            out[i] = (out[i][0], ctx.judge(out[i][1]))
        waiting.clear()

    for i, (_, v) in enumerate(rows):
        if v.fact is not None and v.fact.turn is not None:
            settle(v)
        elif v.human:
            waiting.append(i)
    if waiting:
        settle(latest_turn(fd, oldest, rules))
    return out


def items_page(path: str, rules: RowRules, before: int | None, limit: int) -> dict[str, Any]:
    """One page of items newest first, ending before the row that starts at ``before``.

    Raises InvalidArgument when ``before`` is not a row boundary of this file, OSError on I/O errors.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            raise IsADirectoryError(path)
        end = complete_end(fd, st.st_size)
        if before is not None:
            if before > end or (before > 0 and pread_full(fd, 1, before - 1) != b"\n"):
                raise InvalidArgument("before does not name an item of this thread")
            end = before
        rows: list[tuple[str, Verdict]] = []
        oldest = end
        next_before: str | None = None
        for start, stop in rows_backward(fd, end):
            if len(rows) >= limit:
                next_before = rows[-1][0]
                break
            got = _classify_row(fd, start, stop, rules)
            if got is None:
                continue
            verdict, head = got
            rows.append((item_id(start, head, stop - start), verdict))
            oldest = start
        if rules.has_context:
            rows = _in_context(fd, rows, oldest, end, rules)
        items: list[dict[str, Any]] = []
        for rid, verdict in rows:
            item: dict[str, Any] = {
                "id": rid,
                "kind": HUMAN if verdict.human else OTHER,
                "timestamp": verdict.timestamp if verdict.human else None,
            }
            if verdict.human:
                item.update(_echo(verdict))
            items.append(item)
        return {"items": items, "nextBefore": next_before}
    finally:
        os.close(fd)
