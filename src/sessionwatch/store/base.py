"""The storage interface, split by role like an event store's recorders.

Seven small role interfaces, each an ABC a backend implements in a module named for it
(``store/sqlite/log.py``, ``store/sqlite/queue.py``, ...):

- :class:`SignalLog`: record events, read them (pages, the whole log, bounds, heads), prune.
- :class:`CursorQueue`: watch cursors and the durable notice queue (watch, ack, peek/drain, sweep).
- :class:`Sessions`: sessions and their transcripts.
- :class:`UpstreamLinks`: adopted upstream sessions and paired nodes.
- :class:`Tokens`: hashed bearer tokens.
- :class:`DataSettings`: the settings stored with the data.
- :class:`SessionStates`: each session's lifecycle state (working, waiting, idle, ended, lost).

:class:`Store` is their composite plus the lifecycle (open/close, cross-process wakes, the readiness
probe, single-runner locks); the engine depends on it where it needs several roles, and code that
needs one role can type against that role alone.

Each write method is one transaction. Methods that queue notices take a ``render`` callable
(target key -> NoticeTemplate) so the notice format stays in the engine while the store writes the
queue rows in the same transaction as the change that causes them. Backends pass the shared
conformance suite, ``sessionwatch.testing.StoreConformance``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from ..listing import ListPosition
from ..notices import NoticeTemplate
from .records import (
    ChangesPage,
    Cursor,
    EventInput,
    EventRecord,
    LifecycleRow,
    Link,
    LogBounds,
    MessageRow,
    Node,
    PruneResult,
    QueueEntry,
    RecordOutcome,
    SessionRow,
    Taken,
    TokenRow,
    WakeRequest,
)

Render = Callable[[str], NoticeTemplate]
WakeListener = Callable[[WakeRequest], None]


class SignalLog(ABC):
    """The append-only signal log: events with global sequences, per-session heads, retention."""

    @abstractmethod
    def record(
        self, ev: EventInput, render: Render, now: int, queue_cap: int, want_wakes: bool
    ) -> RecordOutcome | None:
        """Insert one event, bump its head, seed or update cursors and queue notices, atomically.

        Returns None when ``ev.only_if_watched`` and nothing watches the session (nothing written).
        Also None when ``ev.expected_link`` is set and the session's upstream link no longer has that
        (updated_at, upstream_ref_json).
        A duplicate dedupe key returns the existing event with ``inserted=False`` and changes nothing.
        """

    @abstractmethod
    def changes_since(self, session_key: str, agent_id: str, after: int, limit: int) -> ChangesPage: ...

    @abstractmethod
    def events_after(self, after: int, limit: int, agents: Sequence[str] | None = None) -> list[EventRecord]:
        """The whole log (every session) after a sequence, ascending: for tailing (``log --follow``).
        ``agents`` given: only events of those agents (a scoped token's view), still ``limit`` of them."""

    @abstractmethod
    def log_bounds(self, agents: Sequence[str] | None = None, session: tuple[str, str] | None = None) -> LogBounds:
        """Earliest stored, last recorded and pruned-through sequences of the log: of every session, of
        ``agents``' sessions, or of one ``(session_key, agent_id)`` (for resuming the log stream)."""

    @abstractmethod
    def state_version(self, session_key: str, agent_id: str) -> int: ...

    @abstractmethod
    def state_versions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]: ...

    @abstractmethod
    def prune(
        self,
        now: int,
        retention_ms: int,
        max_rows: int,
        *,
        force: bool,
        interval_ms: int,
        queue_cap: int = 20,
        expire_cursors: bool = True,
    ) -> PruneResult:
        """Retention prune. Unless ``force``, skipped when one ran within ``interval_ms`` (shared).
        Deletes in bounded batches, each its own transaction. With ``expire_cursors``, also examines
        the next bounded slice of cursors: expired ones take their queued notices with them."""


class CursorQueue(ABC):
    """Watch cursors (lastSeen/notified/material per watcher and target) and the notice queue."""

    @abstractmethod
    def register_watch(self, watcher: str, target: str, target_agent: str, provenance: str, now: int) -> bool:
        """Explicit or ambient watch seeded at the target's head; never clobbers an existing row."""

    @abstractmethod
    def unwatch(self, watcher: str, target: str, context_key: str, now: int, queue_cap: int = 20) -> bool:
        """Delete the cursor and its queued notice, and mute implicit notices for the pair."""

    @abstractmethod
    def cursors(self, watcher: str | None = None, target: str | None = None) -> list[Cursor]: ...

    @abstractmethod
    def acknowledge(
        self, watcher: str, targets: Sequence[str], render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        """Ack the frozen watermark of each target; queue exactly one reopen where material moved on."""

    @abstractmethod
    def enqueue(
        self,
        session_key: str,
        text: str,
        context_key: str | None,
        ts: int,
        queue_cap: int,
        queue_only: bool = False,
        notice: tuple[str, int] | None = None,
    ) -> QueueEntry | None:
        """Append with dedupe (context key + exact text) and the cap. ``notice`` = (target, last_seen)
        marks a canonical stale-state notice, which backends may store compactly."""

    @abstractmethod
    def peek(self, session_key: str, render: Render, queue_cap: int = 20) -> list[QueueEntry]: ...

    @abstractmethod
    def drain(
        self, session_key: str, decode: Callable[[str | None], str | None], render: Render, now: int, queue_cap: int
    ) -> Taken:
        """Remove the queue and acknowledge its session-state entries, in one transaction. Entries under a
        live lease (``lease``) stay: another delivery has them. ``withheld``: after it, a lagging pair of
        the watcher has no live notice (the cap evicted it); computed whenever anything was taken."""

    @abstractmethod
    def acknowledge_entries(
        self,
        session_key: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken:
        """Remove the live entries with these stable ids (unknown or gone ids are skipped) and acknowledge
        the session-state ones exactly as ``drain`` does, in one transaction. Returns the removed entries
        (and ``withheld``, as ``drain``)."""

    # -- delivery leases: a delivery the client may not complete (an HTTP answer) ------------------
    # A lease marks entries handed to one delivery (``holder``) until a time. ``drain`` and ``lease``
    # skip entries under another holder's live lease; ``peek`` still shows them (a view, as in v1). A
    # lease whose time passed is void: its entries are back in the queue. Ids are stable ids.

    @abstractmethod
    def lease(
        self, session_key: str, holder: str, render: Render, now: int, until: int, queue_cap: int = 20
    ) -> list[QueueEntry]:
        """Lease to ``holder`` until ``until`` the live entries no other live lease holds, and return them,
        in one transaction (with the writer lock: two concurrent leases never return the same entry)."""

    @abstractmethod
    def renew_lease(self, session_key: str, holder: str, ids: Sequence[int], now: int, until: int) -> bool:
        """Extend ``holder``'s lease on these entries to ``until``, only if it still holds every one of
        them (an expired lease no one took over still counts); False, changing nothing, otherwise."""

    @abstractmethod
    def release_lease(self, session_key: str, holder: str) -> None:
        """Void ``holder``'s leases (a delivery that failed): its entries are free for the next drain."""

    @abstractmethod
    def acknowledge_leased(
        self,
        session_key: str,
        holder: str,
        ids: Sequence[int],
        decode: Callable[[str | None], str | None],
        render: Render,
        now: int,
        queue_cap: int,
    ) -> Taken | None:
        """``acknowledge_entries`` of a delivery that completed, only if ``holder`` still holds every id
        (as ``renew_lease``); its leases end. None, changing nothing, when the lease was lost."""

    @abstractmethod
    def reconcile(
        self, watcher: str, target: str, after: int, last: int, render: Render, now: int, queue_cap: int
    ) -> list[WakeRequest]:
        """``watcher`` read ``target``'s changes after ``after`` up to ``last`` (the page's last sequence).

        When the read starts at or before the cursor's last_seen and reaches past it, last_seen moves to
        ``last`` and the pair's queued notice is withdrawn, or, when notify-eligible events lie beyond
        ``last``, replaced by one notice quoting ``last``. Otherwise nothing changes. One transaction."""

    @abstractmethod
    def has_pending_notice(self, watcher: str, queue_cap: int = 20) -> bool:
        """Is a waking (not queue-only) session-state entry queued for ``watcher``?"""

    @abstractmethod
    def sweep(self, render: Render, now: int, queue_cap: int) -> tuple[int, list[WakeRequest]]:
        """Re-materialize every unacknowledged notice whose watcher session exists."""


class Sessions(ABC):
    """Sessions (one row per session key and agent) and their transcripts."""

    @abstractmethod
    def put_session(self, row: SessionRow) -> tuple[SessionRow, bool]:
        """Create, or update kind/spawned_by/label of, a session. Returns (row, created)."""

    @abstractmethod
    def get_session(self, session_key: str, agent_id: str) -> SessionRow | None: ...

    @abstractmethod
    def get_session_with_version(self, session_key: str, agent_id: str) -> tuple[SessionRow, int] | None:
        """The session and its stateVersion (``SignalLog.state_version``: 0 before its first event) in one
        read, as session_status shows them; None when there is no such session."""

    def get_session_status(
        self, session_key: str, agent_id: str
    ) -> tuple[SessionRow, int, dict[str, Any] | None] | None:
        """``get_session_with_version`` plus the lifecycle's public shape (``LifecycleRow.to_json``, None
        when never reported). The built-in stores answer it in one read; this default takes two."""
        found = self.get_session_with_version(session_key, agent_id)
        if found is None:
            return None
        state = self.get_lifecycle(session_key, agent_id)  # type: ignore[attr-defined]
        return found[0], found[1], None if state is None else state.to_json()

    @abstractmethod
    def list_sessions(
        self,
        agent_id: str | None,
        kinds: Sequence[str] | None,
        limit: int,
        agents: Sequence[str] | None = None,
        after: ListPosition | None = None,
        states: Sequence[str] | None = None,
    ) -> list[SessionRow]:
        """At most ``limit`` sessions in the listing order (newest created first, see ``listing.py``),
        starting after ``after`` when given. ``agents`` given: only sessions of those agents (a scoped
        token's view). Reads about ``limit`` rows per agent and kind asked for, never the whole table.
        ``states`` given: only sessions in one of those lifecycle states (rows are then filtered as the
        walk goes, so a page may read more rows than it returns)."""

    @abstractmethod
    def update_session(self, session_key: str, agent_id: str, now: int, **fields: Any) -> bool:
        """Set session_id, active_run_id, goal or spawned_by (only the given fields)."""

    @abstractmethod
    def end_run(self, session_key: str, agent_id: str, run_id: str, now: int) -> bool:
        """Clear the active run if it is ``run_id``; True if it was."""

    @abstractmethod
    def reset_session(
        self, session_key: str, agent_id: str, new_session_id: str, now: int, context_prefix: str, queue_cap: int = 20
    ) -> bool:
        """New session id; drop the session's cursors as a watcher and its queued session-state entries."""

    @abstractmethod
    def delete_session(self, session_key: str, agent_id: str, context_key: str, queue_cap: int = 20) -> bool:
        """Remove the session, its log, head, link, transcript, queue, and every cursor to or from it."""

    @abstractmethod
    def append_message(self, msg: MessageRow) -> MessageRow: ...

    @abstractmethod
    def messages(
        self, session_key: str, agent_id: str, limit: int, after_id: int = 0, role: str | None = None
    ) -> list[MessageRow]:
        """The newest ``limit`` messages (after ``after_id``), oldest first."""

    @abstractmethod
    def own_user_texts(self, session_key: str, agent_id: str, limit: int) -> list[str]:
        """The newest user-role, non-imported message texts, newest first."""


class UpstreamLinks(ABC):
    """Links from sessions to the upstream threads they were adopted from, and paired nodes."""

    @abstractmethod
    def upsert_link(self, link: Link, now: int) -> tuple[Link, str]:
        """Insert, keep progress on the same source, or rebase. Returns (link, 'created'|'same'|'rebased')."""

    @abstractmethod
    def get_link(self, session_key: str, agent_id: str) -> Link | None: ...

    @abstractmethod
    def links(self, catalog_id: str | None = None) -> list[Link]: ...

    @abstractmethod
    def watched_links(self) -> list[Link]:
        """Links whose session key is the target of at least one watch cursor."""

    @abstractmethod
    def advance_link(
        self, session_key: str, agent_id: str, expected_updated_at: int, marker: dict[str, Any], now: int
    ) -> bool:
        """Compare-and-swap the marker; also clears the miss streak."""

    @abstractmethod
    def set_link_misses(self, session_key: str, agent_id: str, expected_updated_at: int, count: int) -> bool: ...

    @abstractmethod
    def delete_link(self, session_key: str, agent_id: str, expected_updated_at: int | None = None) -> bool: ...

    @abstractmethod
    def put_node(self, node: Node) -> Node: ...

    @abstractmethod
    def get_node(self, node_id: str) -> Node | None: ...

    @abstractmethod
    def nodes(self) -> list[Node]: ...


class Tokens(ABC):
    """Bearer tokens, stored hashed (see ``sessionwatch.tokens``)."""

    @abstractmethod
    def create_token(self, token: TokenRow) -> TokenRow: ...

    @abstractmethod
    def get_token(self, token_id: str) -> TokenRow | None: ...

    @abstractmethod
    def tokens(self) -> list[TokenRow]:
        """Every token, revoked ones too, oldest first."""

    @abstractmethod
    def revoke_token(self, token_id: str, now: int) -> bool:
        """Stamp ``revoked_at``; False when there is no such token or it was already revoked."""


class DataSettings(ABC):
    """The settings stored with the data (queue cap, row cap, retention, ...; engine/data_settings.py)."""

    @abstractmethod
    def data_settings(self) -> dict[str, int]:
        """The stored data settings (empty until the first process stored them)."""

    @abstractmethod
    def init_data_settings(self, values: Mapping[str, int], now: int) -> dict[str, int]:
        """Store the values not stored yet (the first opener wins); returns the stored values."""

    @abstractmethod
    def set_data_settings(self, changes: Mapping[str, int], now: int) -> tuple[dict[str, int], dict[str, int]]:
        """Change stored values in one transaction; returns (old, new)."""


class SessionStates(ABC):
    """Each session's lifecycle state, one row per session (docs/lifecycle.md). The rules of a report are
    ``records.apply_report``; a store applies them in one transaction, so of two reports racing for the
    same change exactly one sees it changed. Deleting a session deletes its state."""

    @abstractmethod
    def report_lifecycle(self, report: LifecycleRow) -> tuple[LifecycleRow | None, str]:
        """Apply ``report`` (``records.apply_report``): returns (the state before, the verdict)."""

    @abstractmethod
    def get_lifecycle(self, session_key: str, agent_id: str) -> LifecycleRow | None: ...

    @abstractmethod
    def lifecycles(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LifecycleRow]:
        """The states of these sessions (those never reported are missing), in one read."""

    @abstractmethod
    def lost_candidates(self, cutoff: int, limit: int) -> list[LifecycleRow]:
        """Sessions working or waiting whose last report is at or before ``cutoff``, oldest seen first."""

    @abstractmethod
    def mark_lost(self, session_key: str, agent_id: str, cutoff: int, now: int) -> LifecycleRow | None:
        """Make the session ``lost`` (since ``now``) if it is still working or waiting and was last seen at
        or before ``cutoff``; returns the state it was in, or None when it changed nothing."""

    @abstractmethod
    def lifecycle_counts(self, agents: Sequence[str] | None = None) -> dict[str, int]:
        """How many sessions are in each state (of ``agents`` when given); states with none are missing."""


class Store(SignalLog, CursorQueue, Sessions, UpstreamLinks, Tokens, DataSettings, SessionStates):
    """Storage backend: every role plus the lifecycle. ``url`` names it; ``multi_process`` says whether
    other processes share it. Opening (and applying migrations) is the backend's constructor."""

    url: str
    multi_process: bool = False

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def probe_write(self, now: int) -> None:
        """One small write transaction (readiness); raises when the store does not accept writes."""

    def listen_wakes(self, listener: WakeListener) -> None:
        """Deliver wake requests committed by *other* processes (no-op for single-process stores)."""

    def poll_wakes(self, watchers: Iterable[str]) -> list[WakeRequest]:
        """Fallback for missed cross-process wake notifications (empty for single-process stores)."""
        return []

    def try_lock(self, name: str) -> AbstractContextManager[object] | None:
        """A cross-process lock for single-runner work (monitor ticks); None when not taken."""
        return nullcontext(self)
