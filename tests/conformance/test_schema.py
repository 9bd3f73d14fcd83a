"""The database the migrations build is the schema the code expects, on both backends.

Two checks per backend:
- a new store's catalog (tables, columns and types, constraints, indexes; on PostgreSQL also sequences and
  the functions' signatures) equals the description checked in under expected_schema/;
- a store built by version 0.1.0 (its migrations, as shipped, under old_migrations/) and then opened by
  this version equals a new one; on PostgreSQL including every function's definition, so an upgraded
  database runs exactly the functions of postgres_functions.sql and keeps none that were retired.

A schema change updates the description in the same commit: run this file with
SESSIONWATCH_WRITE_EXPECTED_SCHEMA=1 and review the diff.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from sessionwatch.store.postgres import PostgresStore
from sessionwatch.store.sqlite import SQLiteStore
from tests.support import pg

from ._schema import describe_postgres, describe_sqlite

HERE = Path(__file__).parent
EXPECTED = HERE / "expected_schema"
OLD = HERE / "old_migrations" / "v0_1_0"

needs_pg = pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")


def _same(actual: list[str], expected: list[str], what: str) -> None:
    if actual != expected:
        diff = "\n".join(difflib.unified_diff(expected, actual, "expected", "actual", lineterm=""))
        pytest.fail(f"{what}:\n{diff}", pytrace=False)


def _check_expected(backend: str, actual: list[str]) -> None:
    path = EXPECTED / f"{backend}.txt"
    if os.environ.get("SESSIONWATCH_WRITE_EXPECTED_SCHEMA") == "1":
        path.write_text("\n".join(actual) + "\n")
    expected = path.read_text().splitlines()
    _same(
        actual,
        expected,
        f"a new {backend} store differs from {path.relative_to(HERE.parent.parent)}"
        " (SESSIONWATCH_WRITE_EXPECTED_SCHEMA=1 rewrites it)",
    )


def _old_files(backend: str) -> list[Path]:
    return sorted((OLD / backend).glob("*.sql"))


def test_a_new_sqlite_store_has_the_expected_schema(tmp_path: Path) -> None:
    SQLiteStore(f"sqlite:///{tmp_path}/new.db").close()
    _check_expected("sqlite", describe_sqlite(f"{tmp_path}/new.db"))


def test_a_sqlite_store_of_version_0_1_0_upgrades_to_the_new_schema(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    for f in _old_files("sqlite"):  # as 0.1.0's runner did: statement by statement, then the version
        for statement in f.read_text().split(";\n"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version={int(f.name.split('_', 1)[0])}")
    conn.commit()
    conn.close()
    SQLiteStore(f"sqlite:///{old}").close()
    SQLiteStore(f"sqlite:///{tmp_path}/new.db").close()
    _same(
        describe_sqlite(str(old)),
        describe_sqlite(f"{tmp_path}/new.db"),
        "a 0.1.0 SQLite store opened by this version differs from a new one",
    )


@needs_pg
@pytest.mark.postgres
def test_a_new_postgres_store_has_the_expected_schema() -> None:
    with pg.fresh_database(migrated=False) as url:
        PostgresStore(url).close()
        _check_expected("postgres", describe_postgres(url))


@needs_pg
@pytest.mark.postgres
def test_a_postgres_store_of_version_0_1_0_upgrades_to_the_new_schema() -> None:
    with pg.fresh_database(migrated=False) as old, pg.fresh_database(migrated=False) as new:
        with psycopg.connect(old, autocommit=True) as conn:  # as 0.1.0's runner did, functions and all
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for f in _old_files("postgres"):
                with conn.transaction():
                    conn.execute(f.read_text())  # type: ignore[arg-type]
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (int(f.name.split("_", 1)[0]), f.name),
                    )
        PostgresStore(old).close()
        PostgresStore(new).close()
        _same(
            describe_postgres(old, bodies=True),
            describe_postgres(new, bodies=True),
            "a 0.1.0 PostgreSQL store opened by this version differs from a new one",
        )
