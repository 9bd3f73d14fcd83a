"""What the monitor hands a provider (a probe per watched link) and what it gets back (an outcome)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..hosts.transcripts.verdict import OwnTexts
from ..store.records import Link

ACTIVITY = "activity"
MISSING = "missing"


@dataclass(slots=True)
class Outcome:
    """``activity`` (with a new marker; ``human_turns`` may be 0) or ``missing`` (definitive).

    No outcome at all (None) means inconclusive: nothing to do this tick.
    """

    kind: str
    human_turns: int = 0
    next_marker: dict[str, Any] | None = None
    occurred_at: int | None = None
    dedupe_id: str | None = None
    note: str | None = None


def missing(note: str) -> Outcome:
    return Outcome(MISSING, note=note)


@dataclass(slots=True)
class Probe:
    link: Link
    session_id: str
    source_key: str
    load_own: Callable[[], list[str]]
    _own: OwnTexts | None = field(default=None)

    def own(self) -> OwnTexts:
        """The session's own recent texts, read on first need (a stat-only check never reads them)."""
        if self._own is None:
            self._own = OwnTexts(self.load_own())
        return self._own

    @property
    def own_loaded(self) -> OwnTexts | None:
        return self._own
