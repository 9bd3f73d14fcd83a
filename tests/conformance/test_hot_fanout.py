"""PostgreSQL: a fan-out rewrites its watchers' cursor rows without new row versions piling up.

An update that changes no indexed value is written next to the old version and the old one is reclaimed
as the page is reused (a HOT update); any other update leaves a dead version behind for vacuum. Every
recording of a watched session moves the material position of each of its watchers' cursors, so the
cursor table's indexes must not read that column (migration 0008). Measured: 300 recordings fanning
out to 100 watchers left the table at 106 pages with the index of 0006, 8 pages with 0008's.
"""

from __future__ import annotations

import psycopg
import pytest

from sessionwatch import Gateway
from sessionwatch.store import open_store
from sessionwatch.store.records import EventInput
from tests.support import pg

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL not reachable")]


def _pages(dsn: str, relation: str) -> int:
    query = "SELECT pg_relation_size(%s) / current_setting('block_size')::int"
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, (relation,)).fetchone()
    assert row is not None
    return int(row[0])


def test_fan_out_to_lagging_watchers_does_not_grow_the_cursor_table() -> None:
    with pg.fresh_database() as dsn:
        gw = Gateway(open_store(dsn))
        try:
            target = "agent:a:target"
            gw.put_session(target)
            for i in range(100):
                gw.put_session(f"agent:a:w{i}")
                gw.watch(f"agent:a:w{i}", target)
            pg.settle()  # no CREATE or DROP DATABASE of the test harness running meanwhile (see pg.settle)
            start = _pages(dsn, "cursors")
            for i in range(300):  # every watcher lags from the first one on; none acknowledges
                gw.record(EventInput(target, "a", "human_direct_message", "human", f"change {i}", 1_700_000_000_000))
            assert len(gw.peek_system_events("agent:a:w7")) == 1  # the fan-out did reach them
            grown = _pages(dsn, "cursors") - start
        finally:
            gw.close()
    # 100 rows of about 200 bytes: 3 pages. 30,000 non-HOT row versions would need about 100 more.
    assert grown <= 20, f"the cursor table grew by {grown} pages over 300 fan-outs to 100 watchers"
