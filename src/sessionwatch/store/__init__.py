"""Storage backends behind one interface (:class:`Store`, the composite of the role interfaces in
``base.py``), chosen by URL."""

from __future__ import annotations

import re

from ..store_urls import POSTGRES_SCHEMES, default_sqlite_path
from .base import CursorQueue, DataSettings, Sessions, SignalLog, Store, Tokens, UpstreamLinks
from .records import (
    ChangesPage,
    Cursor,
    EventInput,
    EventRecord,
    Link,
    MessageRow,
    Node,
    PruneResult,
    QueueEntry,
    RecordOutcome,
    SessionRow,
    Taken,
    WakeRequest,
)

__all__ = [
    "Store",
    "SignalLog",
    "CursorQueue",
    "Sessions",
    "UpstreamLinks",
    "Tokens",
    "DataSettings",
    "open_store",
    "check_store_url",
    "POSTGRES_SCHEMES",
    "default_sqlite_path",
    "ChangesPage",
    "Cursor",
    "EventInput",
    "EventRecord",
    "Link",
    "MessageRow",
    "Node",
    "PruneResult",
    "QueueEntry",
    "RecordOutcome",
    "SessionRow",
    "Taken",
    "WakeRequest",
]


# "name://": a URL. A plain path may contain ':' but never a scheme followed by '//'.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def check_store_url(url: object) -> str:
    """Refuse what can only be a mistake (``InvalidArgument``): an unknown scheme such as ``mysql://``
    and ``sqlite:`` without three slashes. Returns the URL unchanged."""
    from ..errors import InvalidArgument
    from .sqlite import sqlite_path

    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("the store URL must be a non-empty string")
    if url.startswith(POSTGRES_SCHEMES):
        return url
    match = _URL.match(url)
    if match and match.group(1).lower() != "sqlite":
        raise InvalidArgument(
            f"unknown store URL scheme {match.group(1)!r}: use sqlite:///relative.db, "
            "sqlite:////absolute.db, a file path, or postgresql://user@host/db"
        )
    sqlite_path(url)  # raises on sqlite:// with two slashes
    return url


def open_store(url: str) -> Store:
    """``sqlite:///path``, ``sqlite:////abs/path``, a plain path, or ``postgresql://...``.

    A URL that can only be a mistake (unknown scheme, ``sqlite://x``, a file in a folder that does not
    exist) raises ``InvalidArgument`` and creates nothing. A store that cannot be opened (unreachable
    server, corrupt or unwritable file, missing driver) raises ``StoreUnavailable`` naming the URL; its
    subclass ``StoreUnreachable`` when the database server did not answer, or answered that it cannot
    take connections yet (down, starting, shutting down, full): a wait may cure that, not a new URL.
    """
    from ..errors import SessionwatchError, StoreUnavailable, StoreUnreachable

    check_store_url(url)
    try:
        if url.startswith(POSTGRES_SCHEMES):
            try:
                from .postgres import PostgresStore
            except ImportError as exc:
                raise StoreUnavailable(
                    "PostgreSQL support needs psycopg and libpq: pip install -e '.[postgres]' in a sessionwatch "
                    f"clone, or -e '.[postgres,binary]' where no libpq is installed ({exc})"
                ) from exc
            return PostgresStore(url)
        from .sqlite import SQLiteStore

        return SQLiteStore(url)
    except SessionwatchError:
        raise
    except Exception as exc:
        shown = url.split("@")[-1] if "://" in url else url  # never echo credentials
        detail = " ".join(str(exc).split())  # one line: drivers' messages can span several
        kind = StoreUnreachable if _unreachable(exc) else StoreUnavailable
        raise kind(f"cannot open store {shown!r}: {exc.__class__.__name__}: {detail}") from exc


# What a server that answered but takes no connections *now* says (libpq gives no SQLSTATE for a
# failed connection, only the server's message).
_NOT_NOW = ("starting up", "shutting down", "in recovery", "too many clients", "too many connections")


def _unreachable(exc: BaseException) -> bool:
    """A PostgreSQL connection failure that waiting may cure (no server answered, or it said "not now"),
    as opposed to one the URL or the server's configuration must fix (no such database, authentication
    failed, refused by pg_hba.conf: every such refusal is a FATAL message of the server)."""
    if type(exc).__name__ not in ("OperationalError", "ConnectionTimeout", "PoolTimeout"):
        return False
    text = str(exc).lower()
    return "fatal:" not in text or any(phrase in text for phrase in _NOT_NOW)
