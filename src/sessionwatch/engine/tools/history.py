"""sessions_history: a session's transcript, each body framed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import validation
from ...keys import shown
from ...types import (
    HistoryResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    Caller,
    _degraded,
    _flag,
    _target,
    frame_message,
)


# -- sessions_history ----------------------------------------------------------------------------
def _history(gw: Engine, args: Mapping[str, Any], caller: Caller) -> HistoryResult:
    row = _target(gw, args.get("sessionKey"), caller)
    limit = validation.integer(args["limit"], "limit", minimum=1, maximum=200) if args.get("limit") is not None else 20
    notes: list[str] = []
    msgs = _degraded(
        notes,
        "the transcript",
        lambda: gw._host_read(
            lambda: gw.store.messages(row.session_key, row.agent_id, limit), "reading the transcript"
        ),
        [],
    )
    lines = [frame_message(m.role, m.text) for m in msgs]
    return cast(
        HistoryResult,
        _flag(
            {
                "sessionKey": row.session_key,
                "messages": [m.to_json() for m in msgs],
                "text": "\n".join(lines) if lines else f"No messages in {shown(row.session_key)}.",
            },
            notes,
        ),
    )
