"""The order of ``sessions_list`` and its opaque page cursor.

Sessions are listed newest-created first: ``created_at`` descending, then ``session_key``, then
``agent_id`` (ascending, byte order). The last two make the primary key, so the order is total.

Why creation time and not the last update: ``created_at`` never changes once a session exists (a
re-put, a goal, a run or a reset keeps it), so a position in this order stays where it is while other
sessions are updated. Keyset pages over ``updated_at`` would skip a session updated between two pages
(it jumps ahead of the cursor). With this order a walk from the first page to the last returns every
session that exists for the whole walk exactly once, in order, whatever is updated, created or deleted
meanwhile; a session created during the walk is newer than the walk's start and shows on the next
walk's first page (it is returned at most once); a deleted one at most once.

The cursor is the base64url text (no padding) of compact JSON naming the last row returned and the
filter it was issued for: ``{"v": 1, "c": created_at, "k": session_key, "a": agent_id,
"f": [agentId or null, sorted kinds or null]}`` (a third item, the sorted lifecycle states,
when that filter is given). Callers treat it as opaque. A cursor is refused
(``invalid_argument``) when it is malformed or was issued for another ``agentId``/``kinds`` filter:
positions are only compared within one listing. The ``limit`` may change from page to page; a scoped
token's agents are not part of the filter (they are the credential's, checked on every page).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgument
from .keys import check_agent_id, parse_key

CURSOR_VERSION = 1
MAX_CURSOR_LENGTH = 8192  # keys are at most 512 characters: a real cursor stays far below this
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_INT64 = 2**63


@dataclass(frozen=True)
class ListPosition:
    """A row's place in the listing order: the page after it starts with the next older row."""

    created_at: int
    session_key: str
    agent_id: str


@dataclass(frozen=True)
class ListFilter:
    """The agents and kinds a listing covers (``None``: any). ``agents == ()``: nothing can match."""

    agents: tuple[str, ...] | None
    kinds: tuple[str, ...] | None

    @property
    def empty(self) -> bool:
        return self.agents == () or self.kinds == ()


def list_filter(agent_id: str | None, kinds: Sequence[str] | None, agents: Sequence[str] | None) -> ListFilter:
    """Combine the ``agentId`` argument with a scoped token's agents (``agents``) into one filter."""
    allowed: tuple[str, ...] | None
    if agents is not None:
        allowed = tuple(sorted(set(agents)))
        if agent_id is not None:
            allowed = (agent_id,) if agent_id in allowed else ()
    else:
        allowed = None if agent_id is None else (agent_id,)
    return ListFilter(allowed, tuple(sorted(set(kinds))) if kinds else None)


def _filter_tag(agent_id: str | None, kinds: Sequence[str] | None, states: Sequence[str] | None = None) -> list[Any]:
    tag: list[Any] = [agent_id, sorted(set(kinds)) if kinds else None]
    if states is not None:  # a lifecycle filter (beyond v1); a cursor without one keeps its v1 shape
        tag.append(sorted(set(states)))
    return tag


def encode_cursor(
    pos: ListPosition, agent_id: str | None, kinds: Sequence[str] | None, states: Sequence[str] | None = None
) -> str:
    body = {
        "v": CURSOR_VERSION,
        "c": pos.created_at,
        "k": pos.session_key,
        "a": pos.agent_id,
        "f": _filter_tag(agent_id, kinds, states),
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(
    cursor: object, agent_id: str | None, kinds: Sequence[str] | None, states: Sequence[str] | None = None
) -> ListPosition:
    """The position a cursor names, or ``InvalidArgument`` (malformed, or issued for another filter)."""
    bad = "cursor is not a sessions_list cursor; pass a nextCursor exactly as it was returned"
    if not isinstance(cursor, str) or not cursor:
        raise InvalidArgument("cursor must be a non-empty string (a nextCursor of sessions_list)")
    if len(cursor) > MAX_CURSOR_LENGTH or not _B64URL.fullmatch(cursor):
        raise InvalidArgument(bad)
    try:
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: deep nesting
        raise InvalidArgument(bad) from None
    if not isinstance(body, dict) or body.get("v") != CURSOR_VERSION or set(body) != {"v", "c", "k", "a", "f"}:
        raise InvalidArgument(bad)
    created, key, agent = body["c"], body["k"], body["a"]
    if (
        type(created) is not int
        or not -_INT64 <= created < _INT64
        or not isinstance(key, str)
        or not isinstance(agent, str)
    ):
        raise InvalidArgument(bad)
    try:
        parse_key(key, "cursor")
        check_agent_id(agent)
    except InvalidArgument:
        raise InvalidArgument(bad) from None
    if body["f"] != _filter_tag(agent_id, kinds, states):
        raise InvalidArgument(
            "cursor was issued for a different agentId/kinds filter (or lifecycle filter): pass the same "
            "agentId, kinds and lifecycle as on the first page, or start again without a cursor"
        )
    return ListPosition(created, key, agent)


@dataclass(frozen=True)
class SessionPage:
    """One page of sessions and the cursor of the next page (``None``: this was the last page)."""

    rows: list[Any]  # SessionRow, newest-created first
    next_cursor: str | None
