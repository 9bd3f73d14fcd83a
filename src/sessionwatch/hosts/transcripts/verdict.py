"""The classification of one transcript row, and the self-echo test against a session's own texts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .normalize import digest_text, normalize

# Who started a Codex turn, as its ``task_started`` row says (``turn_attribution.turn_trigger``).
PERSON = "person"  # "user": typed in the TUI
PROGRAM = "program"  # "exec", "queue", null (an app-server client), or any other value
UNATTRIBUTED = "unattributed"  # no turn_attribution at all: a build from before it existed


@dataclass(frozen=True, slots=True)
class RowFact:
    """A row that is no prompt but says who sends the prompts after it (Codex rollouts): the thread's
    ``session_meta`` (``subagent``: whether a subagent runs the thread) or a turn's ``task_started``
    (``turn``: PERSON, PROGRAM or UNATTRIBUTED)."""

    subagent: bool | None = None
    turn: str | None = None


@dataclass(slots=True)
class Verdict:
    """``human``: the row is a prompt a person could have typed (before the self-echo test).

    Self-echo material, whichever the classifier could keep: ``text`` (normalized) or ``text_digest``
    for a single text; ``parts`` or ``part_digests`` (+ ``joined_digest``) for a Codex item made of
    several text parts. ``parts_overflow`` means there were too many parts to keep their digests.
    """

    human: bool
    timestamp: str | None = None
    text: str | None = None
    text_digest: str | None = None
    parts: list[str] | None = None
    part_digests: list[str] | None = None
    joined_digest: str | None = None
    parts_overflow: bool = False
    text_prefix: str | None = None  # for display when only a digest is kept
    fact: RowFact | None = None  # a context row (never human); see RowFact

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"human": self.human, "timestamp": self.timestamp}
        for key in ("text", "text_digest", "parts", "part_digests", "joined_digest"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.parts_overflow:
            out["parts_overflow"] = True
        return out


NOT_HUMAN = Verdict(False)


class OwnTexts:
    """A session's most recent own user texts, normalized (empties dropped), with lazy digests."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.raw = list(texts)
        self.normalized = {n for n in (normalize(t) for t in self.raw) if n}
        self._digests: set[str] | None = None

    @property
    def digests(self) -> set[str]:
        if self._digests is None:
            self._digests = {digest_text(t) for t in self.normalized}
        return self._digests

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnTexts) and self.raw == other.raw


def is_external(v: Verdict, own: OwnTexts) -> bool:
    """True when the row's text is not one the session itself sent (docs/upstream.md, "Which rows are a person")."""
    if v.parts is not None:
        parts = [p for p in v.parts if p]
        joined = " ".join(parts)
        mine = joined in own.normalized or (len(parts) > 1 and all(p in own.normalized for p in parts))
        return not mine
    if v.part_digests is not None or v.joined_digest is not None:
        digests = own.digests
        parts_d = v.part_digests or []
        mine = (v.joined_digest in digests) or (
            not v.parts_overflow and len(parts_d) > 1 and all(p in digests for p in parts_d)
        )
        return not mine
    if v.text is not None:
        return v.text not in own.normalized
    if v.text_digest is not None:
        return v.text_digest not in own.digests
    return True


def parse_timestamp(value: object) -> int | None:
    """ISO-8601 (``...Z`` or with an offset) or epoch seconds/milliseconds -> epoch ms."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
        if v != v or v in (float("inf"), float("-inf")):
            return None
        return int(v if v > 1e11 else v * 1000)
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)
