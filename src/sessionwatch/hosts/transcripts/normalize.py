"""Text normalization and digests for the self-echo check.

A user text is compared after trimming and collapsing every whitespace run (``str.isspace``) to one
space. Rows too large to hold in memory are compared by digest instead of by text: a polynomial hash
over the normalized UTF-8 bytes modulo the Mersenne prime 2**127 - 1, plus the byte length. It can be
computed chunk by chunk and its state is two integers, so it survives in a JSON marker between ticks.
"""

from __future__ import annotations

from typing import Any

_P = (1 << 127) - 1
_FOLD_AT = 64 * 1024  # fold buffered bytes into the hash in blocks (big-int arithmetic is per call)


def normalize(text: str) -> str:
    """Trim and collapse whitespace runs to one space."""
    return " ".join(text.split())


class Digest:
    """Incremental polynomial hash of a byte string; ``hexdigest()`` is ``<32 hex>:<length>``."""

    __slots__ = ("h", "n", "_buf")

    def __init__(self, h: int = 0, n: int = 0) -> None:
        self.h = h
        self.n = n
        self._buf = bytearray()

    def update(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) >= _FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        if self._buf:
            self.h = (self.h * pow(256, len(self._buf), _P) + int.from_bytes(self._buf, "big")) % _P
            self.n += len(self._buf)
            self._buf.clear()

    def hexdigest(self) -> str:
        self._fold()
        return f"{self.h:032x}:{self.n}"

    def extend(self, other: Digest, sep: bytes = b"") -> None:
        """Append ``sep`` (only when this digest is non-empty) and then ``other``'s bytes."""
        self._fold()
        other._fold()
        if sep and self.n:
            self.update(sep)
            self._fold()
        self.h = (self.h * pow(256, other.n, _P) + other.h) % _P
        self.n += other.n

    def state(self) -> list[int]:
        self._fold()
        return [self.h, self.n]

    @classmethod
    def from_state(cls, state: list[int]) -> Digest:
        return cls(int(state[0]), int(state[1]))


def digest_text(normalized: str) -> str:
    d = Digest()
    d.update(normalized.encode("utf-8"))
    return d.hexdigest()


PREFIX_CHARS = 256
_TAIL_CHARS = 48


class StreamText:
    """Normalizes a string that arrives in pieces; keeps its digest, a prefix and watched substrings.

    ``watch`` names substrings whose presence anywhere in the normalized text must be known at the end
    (each shorter than the kept tail).
    """

    __slots__ = ("digest", "prefix", "tail", "started", "pending", "seen", "watch")

    def __init__(self, watch: tuple[str, ...] = ()) -> None:
        self.digest = Digest()
        self.prefix = ""
        self.tail = ""
        self.started = False
        self.pending = False
        self.watch = watch
        self.seen = [False] * len(watch)

    def feed(self, text: str) -> None:
        if not text:
            return
        words = text.split()
        if not words:
            self.pending = True
            return
        out = " ".join(words)
        if self.started and (self.pending or text[0].isspace()):
            out = " " + out
        self.started = True
        self.pending = text[-1].isspace()
        self._emit(out)

    def _emit(self, out: str) -> None:
        self.digest.update(out.encode("utf-8"))
        if len(self.prefix) < PREFIX_CHARS:
            self.prefix = (self.prefix + out)[:PREFIX_CHARS]
        if self.watch:
            window = self.tail + out
            for i, needle in enumerate(self.watch):
                if not self.seen[i] and needle in window:
                    self.seen[i] = True
        self.tail = (self.tail + out)[-_TAIL_CHARS:]

    def to_state(self) -> dict[str, Any]:
        return {
            "d": self.digest.state(),
            "p": self.prefix,
            "t": self.tail,
            "s": self.started,
            "w": self.pending,
            "seen": self.seen,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], watch: tuple[str, ...] = ()) -> StreamText:
        st = cls(watch)
        st.digest = Digest.from_state(state["d"])
        st.prefix = state["p"]
        st.tail = state["t"]
        st.started = bool(state["s"])
        st.pending = bool(state["w"])
        st.seen = [bool(x) for x in state["seen"]]
        return st
