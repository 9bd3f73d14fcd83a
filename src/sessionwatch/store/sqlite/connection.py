"""SQLite connection handling: the store URL, the file, the pragmas, the migrations, the transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import InvalidArgument
from ...store_urls import default_sqlite_path

PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=OFF",
    # A checkpoint runs inside the commit that crosses this many WAL pages (40 MB): rarer, larger
    # checkpoints keep the fsync off all but a few recordings. journal_size_limit trims the file after.
    "PRAGMA wal_autocheckpoint=10000",
    "PRAGMA journal_size_limit=67108864",
)


def sqlite_path(url: str) -> str:
    """``sqlite:///rel.db``, ``sqlite:////abs.db`` or a plain path -> filesystem path.

    ``sqlite://x.db`` (two slashes) names a host in the URL convention, which SQLite has none of: it is
    refused rather than guessed at."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url[len("sqlite:///") :]
    if url.lower().startswith("sqlite:"):
        raise InvalidArgument(
            f"store URL {url!r} is not sqlite:///relative.db or sqlite:////absolute.db "
            "(three slashes before a relative path, four before an absolute one)"
        )
    return url


def _prepare_file(path: str) -> bool:
    """Check the store file's folder; returns True when the file does not exist yet (it will be created).

    Only the per-user default folder is created: any other missing folder is most likely a typo, so it
    is an error that creates nothing."""
    file = Path(path)
    folder = file.parent
    if not folder.is_dir():
        if file.absolute() == default_sqlite_path().absolute():
            folder.mkdir(parents=True, exist_ok=True)
        elif folder.exists():
            raise InvalidArgument(f"cannot create the store file {file}: {folder} is not a folder")
        else:
            raise InvalidArgument(
                f"the folder of the store file {file} does not exist: create it first (mkdir -p {folder})"
            )
    return not file.exists()


def apply_migrations(conn: sqlite3.Connection) -> int:
    """Apply numbered migration files newer than ``PRAGMA user_version``; safe with concurrent openers."""
    folder: Any = Path(__file__).parent.parent / "migrations" / "sqlite"  # beside the package in any normal install
    if not folder.is_dir():  # a zipped install: ask importlib (slower to import, so only then)
        from importlib import resources

        folder = resources.files("sessionwatch.store").joinpath("migrations/sqlite")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if files and current >= int(files[-1].name.split("_", 1)[0]):
        return current  # up to date: no write lock (short-lived clients such as a hook open stores often)
    conn.execute("BEGIN IMMEDIATE")  # serializes concurrent starts; the version is re-read under the lock
    try:
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for f in files:
            version = int(f.name.split("_", 1)[0])
            if version > current:
                for statement in f.read_text().split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={version}")
                current = version
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current


class SQLiteConnection:
    """One SQLite file behind one connection and a lock (thread-safe): the base of every SQLite role.

    Each role class (``SQLiteLog``, ``SQLiteQueue``, ...) is this plus the role's methods, so one role can be
    opened alone; ``SQLiteStore`` (store.py) is all of them on one connection."""

    url: str

    def __init__(self, url: str) -> None:
        self.url = url
        path = sqlite_path(url)
        self.created = False  # True when this process created the file (faces say so once)
        if path != ":memory:":
            path = str(Path(path).expanduser())
            self.created = _prepare_file(path)
        self.path = path
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=512)
        for pragma in PRAGMAS:
            self._conn.execute(pragma)
        self.schema_version = apply_migrations(self._conn)

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            self._conn.close()

    # -- transactions ----------------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the writer lock is taken up front, never upgraded)."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: several statements see one snapshot."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
