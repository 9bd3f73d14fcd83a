"""A store built at the migration before agent-scoped ids (SQLite 0007, PostgreSQL 0008) keeps every event
across the upgrade, and then holds the new uniqueness: a dedupe key per (agent, origin), run and operation
keys naming their session.

The old log mixes every kind of key an old version wrote: a client's key, the keys sessionwatch built
(created:, child-spawned:, run-terminal:, compacted:, upstream:, adopted:, upstream-missing:), a run id
with a space and a colon, events without a key. Its AUTOINCREMENT / identity high-water mark (40) is above
the last row left, as after a prune of the newest rows: the upgrade must not hand those sequences out again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock
from tests.support import pg

MIGRATIONS = Path(__file__).resolve().parents[2] / "src" / "sessionwatch" / "store" / "migrations"

A_MAIN, A_KID, B_MAIN, B_KID = "agent:a:main", "agent:a:subagent:kid", "agent:b:main", "agent:b:subagent:kid"
HIGH_WATER = 40
NOW = 1_800_000_000_000  # ManualClock's start: the old events are recent, so no prune takes them

SESSIONS = [  # (key, agent, session id, kind, spawned by, active run)
    (A_MAIN, "a", "sa", "main", None, None),
    (A_KID, "a", "sk", "subagent", A_MAIN, None),
    (B_MAIN, "b", "sb", "main", None, None),
    (B_KID, "b", "sbk", "subagent", B_MAIN, "run-1"),
    ("global", "a", "sg", "main", None, None),
]

# (sequence, dedupe key, session, agent, kind, actor type, run id) as an old version wrote them, then what
# the upgrade makes of the key: the new key, and whether a client sent it.
HDM = "human_direct_message"
OLD_EVENTS: list[tuple[Any, ...]] = [
    (1, f"created:a:{A_KID}:sk", A_KID, "a", "created", "agent", None, f"created:a:{A_KID}:sk", False),
    (2, "child-spawned:run-1", A_KID, "a", "child_spawned", "agent", "run-1", f"child-spawned:{A_KID} run-1", False),
    (3, "chat-1", A_KID, "a", HDM, "human", None, "chat-1", True),
    (4, "run-terminal:run-1", A_KID, "a", "run_failed", "system", "run-1", f"run-terminal:{A_KID} run-1", False),
    (5, "compacted:op-1", A_KID, "a", "compacted", "system", None, f"compacted:{A_KID} op-1", False),
    (6, f"upstream:{A_KID}:claude:9:abc", A_KID, "a", HDM, "human", None, f"upstream:{A_KID}:claude:9:abc", False),
    (7, f"adopted:{A_KID}", A_KID, "a", "adopted", "human", None, f"adopted:{A_KID}", False),
    (8, None, A_KID, "a", "goal_changed", "system", None, None, False),
    (
        9,
        f"upstream-missing:{B_MAIN}:x:5",
        B_MAIN,
        "b",
        "upstream_missing",
        "system",
        None,
        f"upstream-missing:{B_MAIN}:x:5",
        False,
    ),
    (10, "child-spawned:run-2", B_KID, "b", "child_spawned", "agent", "run-2", f"child-spawned:{B_KID} run-2", False),
    (11, "run-terminal:r 1:x", B_KID, "b", "run_completed", "system", "r 1:x", f"run-terminal:{B_KID} r 1:x", False),
    (12, "compacted:op 2", "global", "a", "compacted", "system", None, "compacted:global op 2", False),
    (13, "chat-2", B_KID, "b", HDM, "human", None, "chat-2", True),
    (14, "run-terminal:run-9", B_KID, "b", "run_completed", "system", "run-9", f"run-terminal:{B_KID} run-9", False),
]
KEPT = "sequence, session_key, session_id, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, body"


def _event_row(seq: int, key: str | None, session: str, agent: str, kind: str, actor: str, run: str | None) -> tuple:
    body: dict[str, Any] = {"kind": kind, "actorType": actor, "occurredAt": NOW - seq, "summary": f"old {kind}"}
    if run is not None:
        body["runId"] = run
    sid = next(s[2] for s in SESSIONS if s[0] == session and s[1] == agent)
    return (seq, key, session, sid, agent, kind, actor, run, NOW - seq, f"old {kind}", json.dumps(body))


def _fill(execute: Any, placeholder: str, overriding: str) -> None:
    p = placeholder
    for key, agent, sid, kind, parent, run in SESSIONS:
        execute(
            "INSERT INTO sessions (session_key, agent_id, session_id, kind, spawned_by, active_run_id, created_at,"
            f" updated_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, 0, 0)",
            (key, agent, sid, kind, parent, run),
        )
    for old in OLD_EVENTS:
        execute(
            "INSERT INTO events (sequence, dedupe_key, session_key, session_id, agent_id, kind, actor_type, run_id,"
            f" occurred_at, summary, body) {overriding} VALUES ({', '.join([p] * 11)})",
            _event_row(*old[:7]),
        )
    for key, agent, *_ in SESSIONS:
        execute(
            "INSERT INTO heads (session_key, agent_id, last_sequence, updated_at)"
            f" SELECT session_key, agent_id, max(sequence), 0 FROM events WHERE session_key = {p} AND agent_id = {p}"
            " GROUP BY session_key, agent_id",
            (key, agent),
        )


def _sqlite_at_0007(path: Path) -> str:
    conn = sqlite3.connect(path)
    for f in sorted((MIGRATIONS / "sqlite").glob("*.sql")):
        if int(f.name.split("_", 1)[0]) > 7:
            break
        for statement in f.read_text().split(";\n"):  # as the store's runner does
            if statement.strip():
                conn.execute(statement)
    _fill(conn.execute, "?", "")
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", (HIGH_WATER,))
    conn.execute("PRAGMA user_version=7")
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@contextmanager
def _postgres_at_0008() -> Iterator[str]:
    with pg.fresh_database(migrated=False) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for f in sorted((MIGRATIONS / "postgres").glob("*.sql")):
                version = int(f.name.split("_", 1)[0])
                if version > 8:
                    break
                with conn.transaction():
                    conn.execute(f.read_text())  # type: ignore[arg-type]
                    conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, f.name))
            with conn.transaction():
                _fill(conn.execute, "%s", "OVERRIDING SYSTEM VALUE")
                conn.execute("SELECT setval(pg_get_serial_sequence('events', 'sequence'), %s)", (HIGH_WATER,))
        yield url


def _rows(query: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in query(f"SELECT {KEPT}, dedupe_key, client_dedupe FROM events ORDER BY sequence")]


def _check(url: str, rows: Any) -> None:
    Gateway.open(url, clock=ManualClock(), timers=False).close()  # opening migrates
    # every row is there, unchanged but for its key, and each key is where the rules put it
    want = []
    for *old, key, client in OLD_EVENTS:
        r = _event_row(*old)
        want.append((r[0], r[2], r[3], r[4], r[5], r[6], None, r[7], r[8], r[9], r[10], key, client))
    assert [(*r[:12], bool(r[12])) for r in rows()] == want

    with Gateway.open(url, clock=ManualClock(), timers=False) as gw:
        # a retry from before the upgrade is still a duplicate of the old event
        again = gw.end_run(A_KID, "run-1", "error")
        assert again["recorded"] is False and again["event"]["sequence"] == 4
        compaction = gw.record_compaction(A_KID, "op-1")
        assert compaction["recorded"] is False and compaction["event"]["sequence"] == 5
        assert gw.record_compaction("global", "op 2", agent_id="a")["event"]["sequence"] == 12
        assert gw.end_run(B_KID, "r 1:x", "ok")["recorded"] is False
        turn = gw.inbound(A_KID, "typed again", channel="cli", dedupe_key="chat-1")
        assert turn["event"]["sequence"] == 3
        # the new uniqueness: b's own chat-1, and a client key spelled like an old internal key
        theirs = gw.inbound(B_KID, "typed", channel="cli", dedupe_key="chat-1")["event"]
        assert (theirs["sessionKey"], theirs["agentId"]) == (B_KID, "b")
        assert theirs["sequence"] > HIGH_WATER  # the high-water mark survived the rebuild
        guess = gw.inbound(A_KID, "typed", channel="cli", dedupe_key="run-terminal:run-1")["event"]
        assert guess["kind"] == "human_direct_message" and guess["sequence"] > theirs["sequence"]
        # b's run-1 is not a's run-1
        ended = gw.end_run(B_KID, "run-1", "cancelled")
        assert ended["recorded"] is True and ended["wasActive"] is True
        assert ended["event"]["dedupeKey"] == f"run-terminal:{B_KID} run-1"
    assert len(rows()) == len(OLD_EVENTS) + 3


def test_a_sqlite_store_at_0007_keeps_every_event_and_scopes_its_ids(tmp_path: Path) -> None:
    url = _sqlite_at_0007(tmp_path / "old.db")

    def rows() -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(tmp_path / "old.db")
        try:
            return _rows(conn.execute)
        finally:
            conn.close()

    _check(url, rows)
    conn = sqlite3.connect(tmp_path / "old.db")
    try:  # the store itself refuses a second (agent, key, origin), and only that
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO events (dedupe_key, client_dedupe, session_key, agent_id, kind, actor_type, occurred_at,"
                " summary, body) VALUES ('chat-1', 1, ?, 'a', 'human_direct_message', 'human', 0, 's', '{}')",
                (A_KID,),
            )
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


@pytest.mark.postgres
@pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")
def test_a_postgres_store_at_0008_keeps_every_event_and_scopes_its_ids() -> None:
    with _postgres_at_0008() as url:

        def rows() -> list[tuple[Any, ...]]:
            with psycopg.connect(url) as conn:
                return _rows(lambda q: conn.execute(q).fetchall())

        _check(url, rows)
        with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO events (dedupe_key, client_dedupe, session_key, agent_id, kind, actor_type, occurred_at,"
                " summary, body) VALUES ('chat-1', true, %s, 'a', 'human_direct_message', 'human', 0, 's', '{}')",
                (A_KID,),
            )
