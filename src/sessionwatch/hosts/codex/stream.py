"""Codex rollout rows too long to hold: the streaming reducer, twin of ``rows.classify_codex`` (see
``transcripts/reducing.py``)."""

from __future__ import annotations

from typing import Any

from ..transcripts.jsonstream import Path
from ..transcripts.normalize import Digest, StreamText
from ..transcripts.reducing import MAX_PART_DIGESTS, text_of
from ..transcripts.verdict import NOT_HUMAN, PERSON, PROGRAM, UNATTRIBUTED, RowFact, Verdict


class CodexReducer:
    # payload fields of the context rows (session_meta, task_started), reset with the payload
    _CONTEXT = ("tsrc", "srcsub", "ta", "trig")

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        s = state or {}
        # type, timestamp, ptype, kind, itype; tsrc (thread_source), srcsub (a source object naming a
        # subagent), ta (turn_attribution is an object), trig (its turn_trigger)
        self.f: dict[str, Any] = dict(s.get("f", {}))
        self.p_obj: bool = s.get("po", False)
        self.msg = text_of(s.get("m"))  # payload.message when a string
        self.i_obj: bool = s.get("io", False)
        self.c_list: bool = s.get("cl", False)
        self.parts: list[str] = list(s.get("pd", []))
        self.overflow: bool = s.get("of", False)
        self.joined = Digest.from_state(s["j"]) if s.get("j") else Digest()
        self.part: dict[str, Any] | None = s.get("pt")
        self.part_text = text_of(self.part.get("x")) if self.part else None

    def to_state(self) -> dict[str, Any]:
        part = None
        if self.part is not None:
            part = {"t": self.part.get("t"), "x": self.part_text.to_state() if self.part_text else None}
        return {
            "f": self.f,
            "po": self.p_obj,
            "m": self.msg.to_state() if self.msg else None,
            "io": self.i_obj,
            "cl": self.c_list,
            "pd": self.parts,
            "of": self.overflow,
            "j": self.joined.state(),
            "pt": part,
        }

    def _reset_item(self, is_obj: bool) -> None:
        self.i_obj = is_obj
        self.f.pop("itype", None)
        self._reset_parts(False)

    def _reset_parts(self, is_list: bool) -> None:
        self.c_list, self.parts, self.overflow, self.joined = is_list, [], False, Digest()
        self.part, self.part_text = None, None

    def start(self, path: Path, kind: str) -> str | None:
        depth = len(path)
        if depth == 0:
            return None
        if depth == 1:
            if path[0] in ("type", "timestamp"):
                return "small" if kind == "string" else None
            if path[0] == "payload":
                self.p_obj = kind == "object"
                for k in ("ptype", "kind", *self._CONTEXT):
                    self.f.pop(k, None)
                self.msg = None
                self._reset_item(False)
            return None
        if path[0] != "payload" or not self.p_obj:
            return None
        if depth == 2:
            key = path[1]
            if key in ("type", "kind", "thread_source"):
                return "small" if kind == "string" else None
            if key == "source":
                self.f["srcsub"] = False
            elif key == "turn_attribution":
                self.f["ta"], self.f["trig"] = kind == "object", None
            if key == "message":
                self.msg = StreamText() if kind == "string" else None
                return "text" if kind == "string" else None
            if key == "item":
                self._reset_item(kind == "object")
            return None
        if depth == 3 and path[1] == "turn_attribution" and self.f.get("ta") and path[2] == "turn_trigger":
            return "small" if kind == "string" else None
        if path[1] != "item" or not self.i_obj:
            return None
        if depth == 3:
            if path[2] == "type":
                return "small" if kind == "string" else None
            if path[2] == "content":
                self._reset_parts(kind == "array")
            return None
        if path[2] != "content" or not self.c_list:
            return None
        if depth == 4 and kind == "object":
            self.part, self.part_text = {"t": None}, None
        elif depth == 5 and self.part is not None:
            if path[4] == "text":
                self.part_text = StreamText() if kind == "string" else None
                return "text" if kind == "string" else None
            if path[4] == "type":
                return "small" if kind == "string" else None
        return None

    def chunk(self, path: Path, text: str) -> None:
        if len(path) == 2 and self.msg is not None:
            self.msg.feed(text)
        elif len(path) == 5 and self.part_text is not None:
            self.part_text.feed(text)

    def end(self, path: Path, kind: str, value: Any) -> None:
        depth = len(path)
        if depth == 0:
            return
        if depth == 1:
            if path[0] in ("type", "timestamp"):
                self.f[path[0]] = value if kind == "string" else None
            elif path[0] == "payload" and kind != "object":
                self.p_obj = False
            return
        if path[0] != "payload" or not self.p_obj:
            return
        if depth == 2:
            key = path[1]
            if key == "type":
                self.f["ptype"] = value if kind == "string" else None
            elif key == "kind":
                # null is "absent"; any other non-string is "some other kind"
                if kind == "null":
                    self.f["kind"] = None
                else:  # a long string (None here) is some other kind too
                    self.f["kind"] = value if kind == "string" and value is not None else "\0other"
            elif key == "message" and kind != "string":
                self.msg = None
            elif key == "item" and kind != "object":
                self._reset_item(False)
            elif key == "thread_source":
                self.f["tsrc"] = value if kind == "string" else None
            elif key == "source" and kind != "object":
                self.f["srcsub"] = False
            elif key == "turn_attribution" and kind != "object":
                self.f["ta"], self.f["trig"] = False, None
            return
        if depth == 3 and path[1] == "source" and path[2] == "subagent":
            self.f["srcsub"] = True  # a key of the source object (an array's path holds indices)
            return
        if depth == 3 and path[1] == "turn_attribution" and self.f.get("ta") and path[2] == "turn_trigger":
            self.f["trig"] = value if kind == "string" else None
            return
        if path[1] != "item" or not self.i_obj:
            return
        if depth == 3:
            if path[2] == "type":
                self.f["itype"] = value if kind == "string" else None
            elif path[2] == "content" and kind != "array":
                self._reset_parts(False)
            return
        if path[2] != "content" or not self.c_list:
            return
        if depth == 5 and self.part is not None:
            if path[4] == "type":
                self.part["t"] = value if kind == "string" else None
            elif path[4] == "text" and kind != "string":
                self.part_text = None
        elif depth == 4 and kind == "object" and self.part is not None:
            if self.part.get("t") == "text" and self.part_text is not None and self.part_text.digest.state()[1]:
                if len(self.parts) < MAX_PART_DIGESTS:
                    self.parts.append(self.part_text.digest.hexdigest())
                else:
                    self.overflow = True
                self.joined.extend(self.part_text.digest, b" ")
            self.part, self.part_text = None, None

    def verdict(self) -> Verdict:
        f = self.f
        if not self.p_obj:
            return NOT_HUMAN
        if f.get("type") == "session_meta":
            return Verdict(False, fact=RowFact(subagent=f.get("tsrc") == "subagent" or f.get("srcsub") is True))
        if f.get("type") != "event_msg":
            return NOT_HUMAN
        if f.get("ptype") == "task_started":
            if not f.get("ta"):
                return Verdict(False, fact=RowFact(turn=UNATTRIBUTED))
            return Verdict(False, fact=RowFact(turn=PERSON if f.get("trig") == "user" else PROGRAM))
        ts = f.get("timestamp")
        if f.get("ptype") == "user_message":
            if f.get("kind") not in (None, "plain"):
                return NOT_HUMAN
            msg = self.msg or StreamText()
            return Verdict(True, timestamp=ts, text_digest=msg.digest.hexdigest(), text_prefix=msg.prefix)
        if f.get("ptype") == "item_completed":
            if not self.i_obj or f.get("itype") != "UserMessage" or not self.c_list:
                return NOT_HUMAN
            return Verdict(
                True,
                timestamp=ts,
                part_digests=list(self.parts),
                joined_digest=self.joined.hexdigest(),
                parts_overflow=self.overflow,
            )
        return NOT_HUMAN
