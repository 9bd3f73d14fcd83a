"""A store created by schema version 1 keeps its queue across the upgrade to stable entry ids (0002):
the live entries keep their order and get ids, the next append gets a fresh id, and ack by id works.
The notice is found only if 0007 backfilled the watcher's slot chain (queue_heads.last_slot) from its cursors.

The old databases are built from the migrations as version 0.1.0 shipped them (old_migrations/), which on
PostgreSQL also defined the functions; since then the functions live in store/postgres_functions.sql and
replace those at the next start (test_schema.py compares the whole upgraded schema with a new one).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import psycopg
import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from sessionwatch.store.postgres import functions_sql
from sessionwatch.testing.helpers import notice
from tests.support import pg

from ._schema import describe_postgres

OLD = Path(__file__).parent / "old_migrations" / "v0_1_0"

MAIN, KID = "agent:a:main", "agent:a:subagent:kid"


def _v1_sql(backend: str) -> str:
    return (OLD / backend / "0001_init.sql").read_text()


# A version-1 queue of main: append indices 1..4 were used, index 1 was renumbered away; live are the
# kid's notice (index 2, in its cursor row) and two generic entries (3, 4).
_ROWS = [
    "INSERT INTO sessions (session_key, agent_id, session_id, kind, created_at, updated_at)"
    " VALUES ('agent:a:main', 'a', 's1', 'main', 0, 0), ('agent:a:subagent:kid', 'a', 's2', 'subagent', 0, 0)",
    "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at) VALUES ('agent:a:subagent:kid', 'a', 7, 0)",
    "INSERT INTO queue_heads (session_key, appended, drained) VALUES ('agent:a:main', 4, 0)",
    "INSERT INTO cursors (watcher, target, last_seen, notified, material, provenance, updated_at, queued_idx,"
    " queued_ls, queued_ts) VALUES ('agent:a:main', 'agent:a:subagent:kid', 5, 7, 7, 'explicit', 0, 2, 5, 0)",
    "INSERT INTO system_events (session_key, idx, context_key, text, ts) VALUES"
    " ('agent:a:main', 3, NULL, 'tick 1', 0), ('agent:a:main', 4, NULL, 'tick 2', 0)",
]


def _check(url: str) -> None:
    with Gateway.open(url, clock=ManualClock(), timers=False) as gw:
        entries = gw.peek_system_events(MAIN)
        assert [e["text"] for e in entries] == [notice(KID, 5), "tick 1", "tick 2"]
        assert [e["id"] for e in entries] == [2, 3, 4]
        gw.enqueue_system_event(MAIN, "tick 3")
        assert gw.peek_system_events(MAIN)[-1]["id"] == 5
        assert gw.ack_system_events(MAIN, [2, 4]) == {"acknowledged": 2}
        assert [e["text"] for e in gw.peek_system_events(MAIN)] == ["tick 1", "tick 3"]
        [cursor] = gw.cursors(watcher=MAIN)
        assert (cursor["lastSeen"], cursor["notified"], cursor["material"]) == (7, 7, 7)


def test_sqlite_version_1_queue_survives_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    for statement in _v1_sql("sqlite").split(";\n"):
        if statement.strip():
            conn.execute(statement)
    for row in _ROWS:
        conn.execute(row)
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    _check(f"sqlite:///{path}")


def test_postgres_version_1_queue_survives_the_upgrade() -> None:
    with pg.fresh_database(migrated=False) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.execute(_v1_sql("postgres"))
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, '0001_init.sql')")
            for row in _ROWS:
                conn.execute(row)
        _check(url)


def _functions(url: str) -> list[str]:
    return [line for line in describe_postgres(url, bodies=True) if line.startswith("function ")]


def _stamp(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'functions_%'").fetchall())


def test_postgres_store_of_version_0_1_0_works_and_runs_the_new_functions() -> None:
    """Version 1 with its queue, then 0.1.0's later migrations (their functions included), then this
    version: the queue behaves as in the v1 test, and every function is this version's."""
    with pg.fresh_database(migrated=False) as url, pg.fresh_database() as new:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for f in sorted((OLD / "postgres").glob("*.sql")):
                with conn.transaction():
                    conn.execute(f.read_text())  # type: ignore[arg-type]
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (int(f.name.split("_", 1)[0]), f.name),
                    )
                if f.name.startswith("0001_"):
                    for row in _ROWS:
                        conn.execute(row)  # type: ignore[arg-type]
            assert not _stamp(url)
        _check(url)
        _, revision, digest = functions_sql()
        assert _stamp(url) == {"functions_revision": str(revision), "functions_sha256": digest}
        assert _functions(url) == _functions(new)


def test_postgres_functions_are_put_back_unless_a_newer_version_wrote_them(caplog: pytest.LogCaptureFixture) -> None:
    """A start replaces functions whose stamp differs from this version's file (a hand edit, an older
    version), but leaves those of a higher revision: a newer gateway installed them (rolling upgrade)."""
    edited = (
        "CREATE OR REPLACE FUNCTION sw_ensure_head(p_session text) RETURNS void LANGUAGE sql AS $$"
        " INSERT INTO queue_heads (session_key) VALUES (p_session) ON CONFLICT DO NOTHING; -- by hand $$"
    )
    with pg.fresh_database() as url:
        pristine = _functions(url)

        def tamper(revision: str) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(edited)  # type: ignore[arg-type]
                conn.execute("UPDATE meta SET value = %s WHERE key = 'functions_revision'", (revision,))
                conn.execute("UPDATE meta SET value = 'another' WHERE key = 'functions_sha256'")

        tamper("999")
        with caplog.at_level(logging.WARNING, logger="sessionwatch.store.postgres"):
            Gateway.open(url, clock=ManualClock(), timers=False).close()
        assert _functions(url) != pristine
        assert _stamp(url)["functions_revision"] == "999"
        assert "holds functions of a newer sessionwatch (revision 999" in caplog.text

        tamper("0")
        Gateway.open(url, clock=ManualClock(), timers=False).close()
        assert _functions(url) == pristine
        assert _stamp(url)["functions_sha256"] == functions_sql()[2]
