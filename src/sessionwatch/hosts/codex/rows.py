"""Which Codex CLI rollout rows are a person's prompt.

A prompt row is the display copy only: an ``event_msg`` whose payload is a ``user_message`` (legacy
history; older builds tag harness text with a ``kind`` other than ``plain``) or an ``item_completed``
carrying a ``UserMessage`` item (paginated history). The ``response_item`` protocol copy of the same
prompt, which also carries harness scaffolding, never counts.

Whether a prompt row is a *person's* depends on rows before it, which :class:`CodexThread` remembers
while a file is read: the rollout's first row, its ``session_meta`` (``thread_source: subagent``, or a
``source`` object naming a ``subagent``: nothing in a subagent's thread is typed by a person), and the latest
``event_msg`` / ``task_started``, whose ``turn_attribution.turn_trigger`` says who started the turn
(``user``: typed in the TUI; ``exec``, ``queue``, null for an app-server client: a program). A turn
without any ``turn_attribution`` comes from a build older than the field; its prompts count, as they
always did.
"""

from __future__ import annotations

from typing import Any

from ..transcripts.normalize import normalize
from ..transcripts.rules import small
from ..transcripts.verdict import NOT_HUMAN, PERSON, PROGRAM, UNATTRIBUTED, RowFact, Verdict


def could_matter(line: bytes) -> bool:
    """The exact byte pre-filter (the file's first row aside, which is always parsed). A prompt row and
    a turn's start are ``event_msg`` rows: one that decodes to these strings contains them literally,
    or uses a ``\\u`` escape. Most bytes are in other rows, which cost one or two scans."""
    return b"\\u" in line or (
        b"event_msg" in line and (b"UserMessage" in line or b"task_started" in line or b"user_message" in line)
    )


def _meta_fact(payload: dict[str, Any]) -> RowFact:
    source = payload.get("source")
    sub = payload.get("thread_source") == "subagent" or (isinstance(source, dict) and "subagent" in source)
    return RowFact(subagent=sub)


def _turn_fact(payload: dict[str, Any]) -> RowFact:
    attribution = payload.get("turn_attribution")
    if not isinstance(attribution, dict):
        return RowFact(turn=UNATTRIBUTED)
    return RowFact(turn=PERSON if attribution.get("turn_trigger") == "user" else PROGRAM)


def classify_codex(row: Any) -> Verdict:
    if not isinstance(row, dict):
        return NOT_HUMAN
    rtype = row.get("type")
    payload = row.get("payload")
    if not isinstance(payload, dict):
        return NOT_HUMAN
    if rtype == "session_meta":
        return Verdict(False, fact=_meta_fact(payload))
    if rtype != "event_msg":
        return NOT_HUMAN
    kind = payload.get("type")
    if kind == "task_started":
        return Verdict(False, fact=_turn_fact(payload))
    timestamp = small(row.get("timestamp"))
    if kind == "user_message":
        tag = payload.get("kind")
        if tag is not None and tag != "plain":
            return NOT_HUMAN
        message = payload.get("message")
        return Verdict(True, timestamp=timestamp, text=normalize(message) if isinstance(message, str) else "")
    if kind == "item_completed":
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "UserMessage":
            return NOT_HUMAN
        content = item.get("content")
        if not isinstance(content, list):
            return NOT_HUMAN
        parts = [
            normalize(p["text"])
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        return Verdict(True, timestamp=timestamp, parts=parts)
    return NOT_HUMAN


class CodexThread:
    """What the rows read so far say about the prompts that follow; saved in the scan's marker.

    ``meta``: the file's first row was judged (only it speaks for the thread: a later ``session_meta``
    would be copied history); ``subagent``: it names a subagent; ``turn``: who started the current turn
    (PERSON, PROGRAM, UNATTRIBUTED, or None before any ``task_started``, which counts as unattributed).
    """

    __slots__ = ("meta", "subagent", "turn")

    def __init__(self, state: Any = None) -> None:
        s = state if isinstance(state, dict) else {}
        self.meta = s.get("meta") is True
        self.subagent = s.get("sub") is True
        turn = s.get("turn")
        self.turn: str | None = turn if turn in (PERSON, PROGRAM, UNATTRIBUTED) else None

    def judge(self, v: Verdict) -> Verdict:
        """Take in a context row, or say whether a prompt row is a person's (NOT_HUMAN if not)."""
        fact = v.fact
        if fact is not None:
            if fact.subagent is not None and not self.meta:
                self.meta, self.subagent = True, fact.subagent
            elif fact.turn is not None:
                self.turn = fact.turn
            return v
        if v.human and (self.subagent or self.turn == PROGRAM):
            return NOT_HUMAN
        return v

    def seen_head(self) -> None:
        """The file's first row has been looked at: a later ``session_meta`` is not this thread's."""
        self.meta = True

    def to_state(self) -> dict[str, Any]:
        return {"meta": self.meta, "sub": self.subagent, "turn": self.turn}
