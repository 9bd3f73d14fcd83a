"""Storage backends behind one interface (:class:`Store`), chosen by URL."""

from __future__ import annotations

from .base import Store
from .records import (ChangesPage, Cursor, EventInput, EventRecord, Link, MessageRow, Node, PruneResult,
                      QueueEntry, RecordOutcome, SessionRow, WakeRequest)

__all__ = ["Store", "open_store", "ChangesPage", "Cursor", "EventInput", "EventRecord", "Link", "MessageRow",
           "Node", "PruneResult", "QueueEntry", "RecordOutcome", "SessionRow", "WakeRequest"]


def open_store(url: str) -> Store:
    """``sqlite:///path``, ``sqlite:////abs/path``, a plain path, or ``postgresql://...``."""
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore  # optional extra: psycopg

        return PostgresStore(url)
    from .sqlite import SQLiteStore

    return SQLiteStore(url)
