"""PostgreSQL for tests: is the server there, and a brand-new database per test.

The server is ``$SESSIONWATCH_TEST_PG_ADMIN`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``).

Every test gets its own database, so no state leaks between tests and the tests of other people
running against the same server never see each other. Creating one is a file copy of a template; the
migrations (the slow part: ~70 ms idle, several hundred under load) run once per test process into a
private template database, and each test's database is copied from it already migrated.
``fresh_database(migrated=False)`` copies the empty ``template1`` instead (for migration tests).
"""

from __future__ import annotations

import atexit
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

ADMIN_URL = os.environ.get("SESSIONWATCH_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
PREFIX = "sw_test_"
TEMPLATE_PREFIX = "sw_tpl_"

_template: str | None = None
_template_lock = threading.Lock()


@lru_cache(maxsize=1)
def available() -> bool:
    """Can we connect (within ~2 s)? Also False when psycopg or psycopg_pool is missing."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (the store needs it)
    except ImportError:
        return False
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception:
        return False
    return True


def url_for(database: str) -> str:
    """The admin URL pointed at another database on the same server."""
    parts = urlsplit(ADMIN_URL)
    return urlunsplit(parts._replace(path="/" + database))


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def _drop_stale() -> None:
    """Drop databases left by test processes that died (their pid is in the name and is gone)."""
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'sw\\_test\\_%' OR datname LIKE 'sw\\_tpl\\_%'")]
        for name in names:
            parts = name.split("_")
            pid = int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None
            if pid is None or pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
                continue  # still running (another test run, maybe someone else's)
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def _migrated_template() -> str:
    """This process's template database, migrated once (then left without connections)."""
    global _template
    with _template_lock:
        if _template is None:
            try:
                _drop_stale()
            except Exception:
                pass
            name = f"{TEMPLATE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
            _admin(f'CREATE DATABASE "{name}"')
            atexit.register(drop_database, name)
            from sessionwatch.store.postgres import apply_migrations

            apply_migrations(url_for(name))
            _template = name
        return _template


def create_database(migrated: bool = True) -> str:
    name = f"{PREFIX}{os.getpid()}_{uuid.uuid4().hex}"
    template = _migrated_template() if migrated else "template1"
    _admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def drop_database(name: str) -> None:
    try:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:
        pass  # the server may be gone at exit; a later run drops it as stale


@contextmanager
def fresh_database(migrated: bool = True) -> Iterator[str]:
    """Yield the URL of a new, uniquely named database; drop it (and its connections) afterwards.

    The database already holds sessionwatch's schema (``migrated=False``: an empty one), which is
    exactly what ``Gateway.open`` would have created in it.
    """
    name = create_database(migrated)
    try:
        yield url_for(name)
    finally:
        drop_database(name)
