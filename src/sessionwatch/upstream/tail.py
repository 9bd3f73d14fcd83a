"""Reading a JSONL file from its end: the last complete row boundary, and rows newest first.

Memory stays bounded by the block size however long a row is: rows are located by scanning for
newlines backwards; the caller decides how to read each row (whole, or streamed when oversized).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

BLOCK = 64 * 1024


def pread_full(fd: int, size: int, offset: int) -> bytes:
    """Read exactly ``size`` bytes at ``offset`` unless the file ends first (short reads are retried)."""
    chunks: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class BackwardReader:
    """Finds newlines backwards, reusing the last block read (rows are usually much smaller)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.block = b""
        self.bstart = 0

    def prev_newline(self, end: int) -> int:
        """Position of the last b"\\n" strictly before ``end``, or -1."""
        pos = end
        while pos > 0:
            if not (self.bstart < pos <= self.bstart + len(self.block)):
                start = max(0, pos - BLOCK)
                self.block = pread_full(self.fd, pos - start, start)
                self.bstart = start
                if not self.block:
                    return -1
            idx = self.block.rfind(b"\n", 0, pos - self.bstart)
            if idx >= 0:
                return self.bstart + idx
            pos = self.bstart
        return -1


def complete_end(fd: int, size: int) -> int:
    """The offset just past the last newline before ``size`` (0 if none): where complete rows end."""
    return BackwardReader(fd).prev_newline(size) + 1


def rows_backward(fd: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each complete row that ends at or before ``end``, newest first.

    ``end`` must be a row boundary (0 or just past a newline). A row's ``end`` excludes its newline.
    """
    reader = BackwardReader(fd)
    pos = end
    while pos > 0:
        nl = pos - 1  # the newline that ends this row
        prev = reader.prev_newline(nl)
        yield prev + 1, nl
        pos = prev + 1
