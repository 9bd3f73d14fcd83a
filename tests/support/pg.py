"""PostgreSQL for tests: is the server there, and a brand-new database per test.

The server is ``$SESSIONWATCH_TEST_PG_ADMIN`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``).

Every test gets its own database, so no state leaks between tests and the tests of others running
against the same server never see each other. A database is a copy of a template that this test
process migrated once (so no test pays for the schema DDL), and copies are made ahead of need on a
background thread while the previous test runs; dropping happens in the background too. On an idle
machine a copy takes ~15 ms; when the disk is busy, ~300 ms, which the prefetch hides.
``fresh_database(migrated=False)`` gives a copy of the empty ``template1`` instead (migration tests).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

ADMIN_URL = os.environ.get("SESSIONWATCH_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
PREFIX = "sw_test_"
TEMPLATE_PREFIX = "sw_tpl_"
AHEAD = 2  # migrated databases kept ready

log = logging.getLogger("tests.support.pg")
_lock = threading.Lock()
_template: str | None = None
_ready: queue.Queue[str] = queue.Queue()
_to_drop: queue.Queue[str | None] = queue.Queue()
_worker: threading.Thread | None = None
_wanted = threading.Event()
_working = threading.Lock()  # held while the background thread copies or drops a database


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
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'sw\\_test\\_%' OR datname LIKE 'sw\\_tpl\\_%'"
            )
        ]
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
    with _lock:
        if _template is None:
            try:
                _drop_stale()
            except Exception:
                pass
            name = f"{TEMPLATE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
            _admin(f'CREATE DATABASE "{name}"')
            from sessionwatch.store.postgres import apply_migrations

            apply_migrations(url_for(name))
            _template = name
            atexit.register(_shutdown)
        return _template


def _copy(template: str) -> str:
    name = f"{PREFIX}{os.getpid()}_{uuid.uuid4().hex}"
    _admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def _background() -> None:
    """Keep AHEAD migrated copies ready and drop finished ones, off the test's critical path."""
    while True:
        try:
            name = _to_drop.get_nowait()
        except queue.Empty:
            name = ""
        if name is None:
            return
        if name:
            with _working:
                drop_database(name)
            continue
        if _ready.qsize() < AHEAD and _template is not None:
            try:
                with _working:
                    _ready.put(_copy(_template))
            except Exception as exc:  # the caller creates its own instead
                log.warning("could not prepare a test database: %s", exc)
                _wanted.wait(1.0)
            continue
        _wanted.wait(0.5)
        _wanted.clear()


def settle(timeout: float = 30.0) -> None:
    """Wait until the background copies and drops are done. A CREATE or DROP DATABASE holds back the
    server's cleanup of dead row versions in every database while it runs, so a test that measures
    that cleanup (tests/conformance/test_hot_fanout.py) waits for it first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        idle = _worker is None or (_to_drop.empty() and (_template is None or _ready.qsize() >= AHEAD))
        if idle and _working.acquire(blocking=False):
            _working.release()
            return
        time.sleep(0.01)
    raise TimeoutError("the test databases' background work did not finish")


def _start() -> None:
    global _worker
    with _lock:
        if _worker is None:
            _worker = threading.Thread(target=_background, name="pg-test-databases", daemon=True)
            _worker.start()


def _shutdown() -> None:
    _to_drop.put(None)
    _wanted.set()
    if _worker is not None:
        _worker.join(10)
    leftovers = []
    while not _ready.empty():
        leftovers.append(_ready.get_nowait())
    while not _to_drop.empty():
        name = _to_drop.get_nowait()
        if name:
            leftovers.append(name)
    for name in [*leftovers, *([_template] if _template else [])]:
        drop_database(name)


def create_database(migrated: bool = True) -> str:
    if not migrated:
        return _copy("template1")
    template = _migrated_template()
    _start()
    try:
        name = _ready.get_nowait()
    except queue.Empty:
        name = _copy(template)
    _wanted.set()  # prepare the next one while this test runs
    return name


def drop_database(name: str) -> None:
    try:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:
        pass  # the server may be gone at exit; a later run drops it as stale


@contextmanager
def fresh_database(migrated: bool = True) -> Iterator[str]:
    """Yield the URL of a new, uniquely named database; it is dropped (connections and all) afterwards.

    The database already holds sessionwatch's schema, exactly what ``Gateway.open`` would have
    created in it (``migrated=False``: an empty one).
    """
    name = create_database(migrated)
    try:
        yield url_for(name)
    finally:
        if _worker is not None:
            _to_drop.put(name)
            _wanted.set()
        else:
            drop_database(name)
