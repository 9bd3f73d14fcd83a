"""An incremental JSON scanner for one transcript row too large to hold in memory.

It validates the row exactly as the fast path's parser (orjson) does — strict RFC 8259, UTF-8, paired
surrogates, no NaN or infinite numbers, depth at most 1024 — and reports values at shallow paths to a
*reducer* that keeps only what classification needs. The scanner's whole state (and the reducer's) is
small and JSON-serializable, so a row can be classified across several monitor ticks, the state riding
in the link's marker between them.

Known divergence from the fast path: a number literal longer than 4,096 characters is treated as
invalid JSON (the row is then not a person's prompt).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import orjson

MAX_DEPTH = 1024
PATH_DEPTH = 6  # reducers only look at paths this shallow
SMALL = 64  # keys and captured string values longer than this compare as "long" (None)
MAX_TOKEN = 4096

_WS = re.compile(rb"[ \t\r\n]*")
_HIGH_ESC = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_NUM_CHARS = re.compile(rb"[-+0-9.eE]*")
_ALPHA = re.compile(rb"[a-z]*")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")

Path = tuple[Any, ...]


class Reducer(Protocol):
    """Receives the values of a row at shallow paths (keys are str or None when too long; indices int)."""

    def start(self, path: Path, kind: str) -> str | None:
        """A value begins. kind: object, array or string. For a string return 'small' (capture up to
        64 characters), 'text' (stream the decoded text to ``chunk``) or None (ignore)."""

    def chunk(self, path: Path, text: str) -> None: ...

    def end(self, path: Path, kind: str, value: Any) -> None:
        """A value ends. kind: object, array, string (value: the captured small string, None when it was
        long or not captured), number (value: the token), true, false or null."""

    def to_state(self) -> dict[str, Any]: ...


class _Invalid(Exception):
    pass


class JsonStream:
    """Feed the bytes of one row (without its newline) with :meth:`feed`; then :meth:`finish`."""

    def __init__(self, reducer: Reducer, state: dict[str, Any] | None = None) -> None:
        self.reducer = reducer
        self.bad = False
        self.stack: list[str] = []
        self.path: list[Any] = []
        self.expect = "V"  # V value, A value or ']', K key or '}', k key, ':' colon, ',' comma or close, E end
        self.carry = b""
        self.in_str = ""  # "" not in a string, "k" key, "v" value
        self.mode: str | None = None
        self.small: str | None = ""
        if state is not None:
            self._load(state)

    # -- state ----------------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        if self.bad:
            return {"bad": True}
        return {
            "st": "".join(self.stack),
            "p": self.path[:PATH_DEPTH],
            "e": self.expect,
            "c": self.carry.decode("latin-1"),
            "s": self.in_str,
            "m": self.mode,
            "sm": self.small,
        }

    def _load(self, s: dict[str, Any]) -> None:
        if s.get("bad"):
            self.bad = True
            return
        self.stack = list(s["st"])
        self.path = list(s["p"]) + [None] * (len(self.stack) - len(s["p"]))
        self.expect = s["e"]
        self.carry = s["c"].encode("latin-1")
        self.in_str = s["s"]
        self.mode = s["m"]
        self.small = s["sm"]

    # -- driving --------------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.bad or not data:
            return
        if self.carry:
            data, self.carry = self.carry + data, b""
        try:
            self._run(data, final=False)
        except _Invalid:
            self.bad = True

    def finish(self) -> bool:
        """True when the row was one complete, valid JSON value."""
        if self.bad:
            return False
        try:
            if self.carry:
                data, self.carry = self.carry, b""
                self._run(data, final=True)
        except _Invalid:
            self.bad = True
            return False
        if self.carry or self.in_str or self.stack or self.expect != "E":
            self.bad = True
        return not self.bad

    # -- scanning -------------------------------------------------------------------------------
    def _cur_path(self) -> Path | None:
        return tuple(self.path) if len(self.path) <= PATH_DEPTH else None

    def _after_value(self) -> None:
        self.expect = "," if self.stack else "E"

    def _run(self, b: bytes, final: bool) -> None:
        i, n = 0, len(b)
        while i < n:
            if self.in_str:
                i = self._string(b, i)
                continue
            i = _WS.match(b, i).end()  # type: ignore[union-attr]  # a `*` pattern always matches
            if i >= n:
                return
            c = b[i]
            exp = self.expect
            if c == 0x22:  # "
                if exp in "Kk":
                    self.in_str, self.small = "k", ""
                elif exp in "VA":
                    path = self._cur_path()
                    self.mode = None if path is None else self.reducer.start(path, "string")
                    self.in_str, self.small = "v", ""
                else:
                    raise _Invalid
                i += 1
            elif c == 0x7B or c == 0x5B:  # { [
                if exp not in "VA" or len(self.stack) >= MAX_DEPTH:
                    raise _Invalid
                obj = c == 0x7B
                path = self._cur_path()
                if path is not None:
                    self.reducer.start(path, "object" if obj else "array")
                self.stack.append("o" if obj else "a")
                self.path.append(None if obj else 0)
                self.expect = "K" if obj else "A"
                i += 1
            elif c == 0x7D or c == 0x5D:  # } ]
                obj = c == 0x7D
                if not self.stack or self.stack[-1] != ("o" if obj else "a") or exp not in ("K," if obj else "A,"):
                    raise _Invalid
                self.stack.pop()
                self.path.pop()
                path = self._cur_path()
                if path is not None:
                    self.reducer.end(path, "object" if obj else "array", None)
                self._after_value()
                i += 1
            elif c == 0x3A:  # :
                if exp != ":":
                    raise _Invalid
                self.expect = "V"
                i += 1
            elif c == 0x2C:  # ,
                if exp != ",":
                    raise _Invalid
                if self.stack[-1] == "o":
                    self.expect = "k"
                else:
                    if len(self.path) <= PATH_DEPTH:
                        self.path[-1] += 1
                    self.expect = "V"
                i += 1
            elif c == 0x2D or 0x30 <= c <= 0x39 or c in (0x74, 0x66, 0x6E):  # number, true, false, null
                if exp not in "VA":
                    raise _Invalid
                number = c not in (0x74, 0x66, 0x6E)
                end = (_NUM_CHARS if number else _ALPHA).match(b, i).end()  # type: ignore[union-attr]  # `*`: matches
                if end >= n and not final:
                    if end - i > MAX_TOKEN:
                        raise _Invalid
                    self.carry = b[i:]
                    return
                token = b[i:end]
                path = self._cur_path()
                if number:
                    if _NUMBER.fullmatch(token) is None or float(token) in (float("inf"), float("-inf")):
                        raise _Invalid
                    if path is not None:
                        self.reducer.end(path, "number", token.decode("ascii"))
                else:
                    if token not in (b"true", b"false", b"null"):
                        raise _Invalid
                    if path is not None:
                        self.reducer.end(path, token.decode("ascii"), None)
                self._after_value()
                i = end
            else:
                raise _Invalid

    def _emit(self, text: str) -> None:
        if self.in_str == "k" or self.mode == "small":
            if self.small is not None:
                self.small += text
                if len(self.small) > SMALL:
                    self.small = None
        elif self.mode == "text":
            path = self._cur_path()
            if path is not None:
                self.reducer.chunk(path, text)

    def _end_string(self) -> None:
        if self.in_str == "k":
            if len(self.path) <= PATH_DEPTH:
                self.path[-1] = self.small
            self.expect = ":"
        else:
            path = self._cur_path()
            if path is not None:
                self.reducer.end(path, "string", self.small if self.mode == "small" else None)
            self._after_value()
        self.in_str, self.mode, self.small = "", None, ""

    def _string(self, b: bytes, i: int) -> int:
        """Consume string content from ``i``: through the closing quote, or to the chunk end keeping an
        incomplete escape, surrogate pair or UTF-8 sequence as carry. Content is decoded (and validated:
        escapes, control characters, UTF-8, surrogates) by the fast parser, a whole run at a time."""
        n = len(b)
        q = b.find(b'"', i)
        while q >= 0 and _backslashes(b, i, q) % 2 == 1:  # an escaped quote
            q = b.find(b'"', q + 1)
        k = q if q >= 0 else _complete_prefix(b, i, n)
        if k > i:
            try:
                self._emit(orjson.loads(b'"' + b[i:k] + b'"'))
            except orjson.JSONDecodeError:
                raise _Invalid from None
        if q >= 0:
            self._end_string()
            return q + 1
        self.carry = b[k:n]
        return n


def _backslashes(b: bytes, lo: int, pos: int) -> int:
    """How many backslashes end right before ``pos`` (not looking before ``lo``)."""
    j = pos
    while j > lo and b[j - 1] == 0x5C:
        j -= 1
    return pos - j


def _complete_prefix(b: bytes, i: int, n: int) -> int:
    """The end of the longest prefix of string content ``b[i:n]`` that decodes on its own."""
    k = n
    j = b.rfind(b"\\", max(i, k - 6), k)
    # an escape starts at j: is it complete?
    if j >= 0 and _backslashes(b, i, j + 1) % 2 == 1 and (j + 1 >= k or (b[j + 1] == 0x75 and j + 6 > k)):
        k = j
    if k - i >= 6 and _HIGH_ESC.fullmatch(b, k - 6, k) and _backslashes(b, i, k - 5) % 2 == 1:
        k -= 6  # a high surrogate: its low half may be in the next chunk
    if k == n:
        for back in range(1, min(4, k - i) + 1):
            c = b[k - back]
            if c < 0x80:
                break
            if c >= 0xC0:  # a UTF-8 lead byte: is its sequence complete?
                if back < (2 if c < 0xE0 else 3 if c < 0xF0 else 4):
                    k -= back
                break
    return k
