"""A plain-text description of a store's schema, one line per fact, for comparing databases.

Both describe functions read the catalog of a real database (sqlite_master and PRAGMAs; pg_catalog), so
what they report is what the migrations (and, on PostgreSQL, postgres_functions.sql) actually built.
Rows (data) are not part of it.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def _norm(sql: str | None) -> str:
    return " ".join((sql or "").split())


def describe_sqlite(path: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        out = [f"user_version {conn.execute('PRAGMA user_version').fetchone()[0]}"]
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            " ORDER BY type DESC, tbl_name, name"
        ).fetchall()
        for kind, name, table, sql in objects:
            if kind == "table":
                flags = [f for f in ("AUTOINCREMENT", "WITHOUT ROWID", "STRICT") if f in (sql or "").upper()]
                out.append(f"table {name}" + (f" ({', '.join(flags)})" if flags else ""))
                for _, col, typ, notnull, default, pk, hidden in conn.execute(f"PRAGMA table_xinfo('{name}')"):
                    out.append(
                        f"  column {col} {typ}"
                        + (" NOT NULL" if notnull else "")
                        + (f" DEFAULT {default}" if default is not None else "")
                        + (f" PK{pk}" if pk else "")
                        + (" GENERATED" if hidden else "")
                    )
                for fk in conn.execute(f"PRAGMA foreign_key_list('{name}')"):
                    out.append(f"  foreign key {fk[3]} -> {fk[2]}({fk[4]}) ON DELETE {fk[6]}")
                for _, index, unique, origin, _partial in sorted(
                    conn.execute(f"PRAGMA index_list('{name}')"), key=lambda r: r[1]
                ):
                    if origin != "c":  # made by a PRIMARY KEY or UNIQUE clause: the column lines say it
                        cols = [r[2] for r in conn.execute(f"PRAGMA index_info('{index}')")]
                        out.append(f"  {origin} index on ({', '.join(cols)})" + (" UNIQUE" if unique else ""))
            else:  # index, view, trigger: their SQL is their definition
                out.append(f"{kind} {name} ON {table}: {_norm(sql)}")
        return out
    finally:
        conn.close()


_PG_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
       CASE WHEN a.attcollation <> t.typcollation THEN co.collname END
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
 ORDER BY c.relname, a.attnum
"""
_PG_TABLES = """
SELECT c.relname, coalesce(array_to_string(c.reloptions, ', '), '')
  FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' ORDER BY 1
"""
_PG_CONSTRAINTS = """
SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
 WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1, 2
"""
_PG_INDEXES = """
SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2
"""
_PG_SEQUENCES = """
SELECT sequencename, data_type::text FROM pg_sequences WHERE schemaname = current_schema() ORDER BY 1
"""
_PG_FUNCTIONS = """
SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), l.lanname, p.provolatile,
       md5(pg_get_functiondef(p.oid))
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1, 2
"""


def describe_postgres(url: str, bodies: bool = False) -> list[str]:
    """Tables (storage options, columns, constraints), indexes, sequences and function signatures of the
    current schema. ``bodies``: add each function definition's md5 (comparing two live databases; the
    checked-in description holds signatures only, so it does not churn with every fix to a body)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        queries = {
            "tables": _PG_TABLES,
            "columns": _PG_COLUMNS,
            "constraints": _PG_CONSTRAINTS,
            "indexes": _PG_INDEXES,
            "sequences": _PG_SEQUENCES,
            "functions": _PG_FUNCTIONS,
        }
        rows: dict[str, list[Any]] = {
            name: conn.execute(query).fetchall()  # type: ignore[arg-type]
            for name, query in queries.items()
        }
    out: list[str] = []
    for table, options in rows["tables"]:
        out.append(f"table {table}" + (f" ({options})" if options else ""))
        for t, col, typ, notnull, default, identity, generated, collation in rows["columns"]:
            if t == table:
                out.append(
                    f"  column {col} {typ}"
                    + (f' COLLATE "{collation}"' if collation else "")
                    + (" NOT NULL" if notnull else "")
                    + (f" DEFAULT {default}" if default else "")
                    + (f" IDENTITY {identity}" if identity else "")
                    + (f" GENERATED {generated}" if generated else "")
                )
        for t, name, definition in rows["constraints"]:
            if t == table:
                out.append(f"  constraint {name}: {definition}")
    for table, name, definition in rows["indexes"]:
        out.append(f"index {name} ON {table}: {definition.replace(f' {schema}.', ' ')}")
    for name, typ in rows["sequences"]:
        out.append(f"sequence {name} {typ}")
    for name, args, result, language, volatility, digest in rows["functions"]:
        out.append(
            f"function {name}({args}) RETURNS {result} LANGUAGE {language} VOLATILITY {volatility}"
            + (f" md5 {digest}" if bodies else "")
        )
    return out
