"""Claude Code rows too long to hold: the streaming reducer, twin of ``rows.classify_claude`` (see
``transcripts/reducing.py``)."""

from __future__ import annotations

from typing import Any

from ..transcripts.jsonstream import Path
from ..transcripts.normalize import StreamText
from ..transcripts.reducing import scalar_truthy, text_of
from ..transcripts.rules import MACHINE_PROMPT_SOURCES, RESEED_TAGS, bad_candidate
from ..transcripts.verdict import NOT_HUMAN, Verdict


class ClaudeReducer:
    _FLAGS = ("isSidechain", "isMeta", "isCompactSummary", "isVisibleInTranscriptOnly")

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        self.f: dict[str, Any] = dict(s.get("f", {}))  # type, promptSource, timestamp, role; flags
        self.msg_obj: bool = s.get("mo", False)
        self.content: str | None = s.get("ck")  # kind of message.content
        self.text = text_of(s.get("ct"), RESEED_TAGS)  # string content
        self.tool_result: bool = s.get("tr", False)
        self.candidates: int = s.get("nc", 0)
        self.bad: bool = s.get("bad", False)
        self.first: list[str] | None = s.get("first")  # [digest, prefix]
        self.block: dict[str, Any] | None = s.get("b")  # {"t": type, "x": text state | None}
        self.block_text = text_of(self.block.get("x"), RESEED_TAGS) if self.block else None

    def to_state(self) -> dict[str, Any]:
        block = None
        if self.block is not None:
            block = {"t": self.block.get("t"), "x": self.block_text.to_state() if self.block_text else None}
        return {
            "f": self.f,
            "mo": self.msg_obj,
            "ck": self.content,
            "ct": self.text.to_state() if self.text else None,
            "tr": self.tool_result,
            "nc": self.candidates,
            "bad": self.bad,
            "first": self.first,
            "b": block,
        }

    def _reset_content(self, kind: str | None) -> None:
        self.content, self.text, self.tool_result, self.candidates = kind, None, False, 0
        self.bad, self.first, self.block, self.block_text = False, None, None, None

    def _candidate(self, st: StreamText) -> None:
        self.candidates += 1
        if bad_candidate(st.prefix, tuple(st.seen)):
            self.bad = True
        if self.first is None:
            self.first = [st.digest.hexdigest(), st.prefix]

    def start(self, path: Path, kind: str) -> str | None:
        depth = len(path)
        if depth == 0:
            return None
        if depth == 1:
            key = path[0]
            if key in ("type", "promptSource", "timestamp"):
                return "small" if kind == "string" else None
            if key in self._FLAGS:
                return "small" if kind == "string" else None
            if key == "message":
                self.msg_obj = kind == "object"
                self.f.pop("role", None)
                self._reset_content(None)
            return None
        if path[0] != "message" or not self.msg_obj:
            return None
        if depth == 2:
            if path[1] == "role":
                return "small" if kind == "string" else None
            if path[1] == "content":
                self._reset_content(kind)
                if kind == "string":
                    self.text = StreamText(RESEED_TAGS)
                    return "text"
            return None
        if path[1] != "content" or self.content != "array":
            return None
        if depth == 3 and kind == "object":
            self.block, self.block_text = {"t": None}, None
        elif depth == 4 and self.block is not None:
            if path[3] == "text":
                self.block_text = StreamText(RESEED_TAGS) if kind == "string" else None
                return "text" if kind == "string" else None
            if path[3] == "type":
                return "small" if kind == "string" else None
        return None

    def chunk(self, path: Path, text: str) -> None:
        if len(path) == 2 and self.text is not None:
            self.text.feed(text)
        elif len(path) == 4 and self.block_text is not None:
            self.block_text.feed(text)

    def end(self, path: Path, kind: str, value: Any) -> None:
        depth = len(path)
        if depth == 0:
            return
        if depth == 1:
            key = path[0]
            if key in ("type", "promptSource", "timestamp"):
                self.f[key] = value if kind == "string" else None
            elif key in self._FLAGS:
                self.f[key] = scalar_truthy(kind, value)
            elif key == "message" and kind not in ("object",):
                self.msg_obj = False
                self._reset_content(None)
            return
        if path[0] != "message" or not self.msg_obj:
            return
        if depth == 2:
            if path[1] == "role":
                self.f["role"] = value if kind == "string" else None
            elif path[1] == "content" and kind not in ("string", "array", "object"):
                self._reset_content(kind)  # a scalar content
            return
        if path[1] != "content" or self.content != "array":
            return
        if depth == 4 and self.block is not None:
            if path[3] == "type":
                self.block["t"] = value if kind == "string" else None
            elif path[3] == "text" and kind != "string":
                self.block_text = None
        elif depth == 3 and kind == "object" and self.block is not None:
            if self.block.get("t") == "tool_result":
                self.tool_result = True
            elif self.block.get("t") == "text" and self.block_text is not None:
                self._candidate(self.block_text)
            self.block, self.block_text = None, None

    def verdict(self) -> Verdict:
        f = self.f
        if f.get("type") != "user" or not self.msg_obj or f.get("role") != "user":
            return NOT_HUMAN
        if any(f.get(k) for k in self._FLAGS):
            return NOT_HUMAN
        if f.get("promptSource") in MACHINE_PROMPT_SOURCES:
            return NOT_HUMAN
        if self.content == "string" and self.text is not None:
            self._candidate(self.text)
        elif self.content != "array" or self.tool_result:
            return NOT_HUMAN
        if not self.candidates or self.bad or self.first is None:
            return NOT_HUMAN
        return Verdict(True, timestamp=f.get("timestamp"), text_digest=self.first[0], text_prefix=self.first[1])
