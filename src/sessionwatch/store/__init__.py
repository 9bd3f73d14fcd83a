"""Storage backends behind one interface (:class:`Store`), chosen by URL."""

from __future__ import annotations

from .base import Store
from .records import (ChangesPage, Cursor, EventInput, EventRecord, Link, MessageRow, Node, PruneResult,
                      QueueEntry, RecordOutcome, SessionRow, WakeRequest)

__all__ = ["Store", "open_store", "ChangesPage", "Cursor", "EventInput", "EventRecord", "Link", "MessageRow",
           "Node", "PruneResult", "QueueEntry", "RecordOutcome", "SessionRow", "WakeRequest"]


def open_store(url: str) -> Store:
    """``sqlite:///path``, ``sqlite:////abs/path``, a plain path, or ``postgresql://...``.

    A store that cannot be opened (unreachable server, corrupt or unwritable file, missing driver)
    raises ``StoreUnavailable`` naming the URL.
    """
    from ..errors import SessionwatchError, StoreUnavailable

    try:
        if url.startswith(("postgresql://", "postgres://")):
            try:
                from .postgres import PostgresStore
            except ImportError as exc:
                raise StoreUnavailable(
                    f"PostgreSQL support needs psycopg: pip install 'sessionwatch[postgres]' ({exc})") from exc
            return PostgresStore(url)
        from .sqlite import SQLiteStore

        return SQLiteStore(url)
    except SessionwatchError:
        raise
    except Exception as exc:
        shown = url.split("@")[-1] if "://" in url else url  # never echo credentials
        raise StoreUnavailable(f"cannot open store {shown!r}: {exc.__class__.__name__}: {exc}") from exc
