"""Classify transcript rows: the fast path for ordinary rows, the streaming path for oversized ones.

A room whose host writes JSONL transcripts gives its :class:`RowRules` (its ``rows.py`` and ``stream.py``);
this module is how any of them is applied. Fast path: the catalog's cheap byte test drops rows that can be
neither a person's prompt nor a context row that says who sends the prompts after it (Codex's
``task_started``) before any JSON parsing (it is exact: a row that decodes to the needed strings must contain
them literally or use a ``\\u`` escape), then orjson and the catalog's dict classifier. A file's first row is
always parsed (``classify_head``): a Codex rollout's ``session_meta`` says whose thread it is. Streaming path:
:class:`JsonStream` with the catalog's reducer, whose state can be saved between ticks.

A prompt row's verdict is then judged by the catalog's thread context (:meth:`RowRules.thread`), which takes
in the context rows of one file in order; its state rides in the scan's marker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .jsonstream import JsonStream, Reducer
from .verdict import NOT_HUMAN, Verdict

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency; stdlib fallback keeps things working
    import json

    def _reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def _loads(data: bytes) -> Any:
        return json.loads(data, parse_constant=_reject_constant)


class ThreadContext(Protocol):
    """What earlier rows of a file say about the prompts after them (see ``hosts/codex/rows.CodexThread``)."""

    def judge(self, v: Verdict) -> Verdict: ...

    def seen_head(self) -> None: ...

    def to_state(self) -> dict[str, Any]: ...


class StateReducer(Reducer, Protocol):
    """A room's streaming reducer (its ``stream.py``): a :class:`Reducer` whose verdict and state survive
    between ticks."""

    def verdict(self) -> Verdict: ...

    def to_state(self) -> dict[str, Any]: ...


class NoContext:
    """Claude Code: every row speaks for itself."""

    def __init__(self, state: Any = None) -> None:
        pass

    def judge(self, v: Verdict) -> Verdict:
        return v

    def seen_head(self) -> None:
        pass

    def to_state(self) -> dict[str, Any]:
        return {}


class RowRules:
    """The per-catalog rules: byte pre-filter, dict classifier and streaming reducer."""

    def __init__(
        self,
        catalog: str,
        could_matter: Callable[[bytes], bool],
        classify: Callable[[Any], Verdict],
        reducer: Callable[[Any], StateReducer],
        context: Callable[[Any], ThreadContext] | None = None,
    ) -> None:
        self.catalog = catalog
        self.could_be_human = could_matter
        self.classify_obj = classify
        self.reducer = reducer
        self._context = context
        # whether a file's context must be known before its rows are judged (a marker without one
        # is from before contexts existed, and the context is then read from the file)
        self.has_context = context is not None

    def thread(self, state: Any = None) -> ThreadContext:
        """A file's context, from a marker's saved state (None or anything unreadable: a fresh one)."""
        return NoContext() if self._context is None else self._context(state)

    def classify(self, line: bytes) -> Verdict:
        """One complete row (no newline; a trailing CR is JSON whitespace)."""
        if not self.could_be_human(line):
            return NOT_HUMAN
        return self.classify_head(line)

    def classify_head(self, line: bytes) -> Verdict:
        """One complete row, parsed whatever its bytes: a file's first row."""
        try:
            row = _loads(line)
        except (ValueError, RecursionError):
            return NOT_HUMAN
        return self.classify_obj(row)

    def stream(self, state: dict[str, Any] | None = None) -> RowStream:
        return RowStream(self, state)


class RowStream:
    """Classify one row fed in pieces, with bounded memory; ``to_state`` survives between ticks."""

    def __init__(self, rules: RowRules, state: dict[str, Any] | None = None) -> None:
        self.rules = rules
        self.reducer = rules.reducer(state.get("r") if state else None)
        self.parser = JsonStream(self.reducer, state.get("j") if state else None)

    def feed(self, data: bytes) -> None:
        self.parser.feed(data)

    def finish(self) -> Verdict:
        if not self.parser.finish():
            return NOT_HUMAN
        return self.reducer.verdict()

    def to_state(self) -> dict[str, Any]:
        return {"j": self.parser.to_state(), "r": {} if self.parser.bad else self.reducer.to_state()}
