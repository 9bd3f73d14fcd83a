"""SQLite: adopted catalog links and paired nodes (the ``UpstreamLinks`` role)."""

from __future__ import annotations

from typing import Any

from ..base import UpstreamLinks
from ..records import Link, Node, dumps
from ..rows import LINK_COLS, link_from_row
from .connection import SQLiteConnection


class SQLiteLinks(SQLiteConnection, UpstreamLinks):
    def upsert_link(self, link: Link, now: int) -> tuple[Link, str]:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {LINK_COLS} FROM upstream_links WHERE session_key = ? AND agent_id = ?",
                (link.session_key, link.agent_id),
            ).fetchone()
            if row is None:
                link.created_at = now
                link.updated_at = now
                link.last_scanned_at = None
                link.miss_count = 0
                link.miss_link_updated_at = None
                conn.execute(
                    f"INSERT INTO upstream_links ({LINK_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        link.session_key,
                        link.agent_id,
                        link.catalog_id,
                        link.host_id,
                        link.thread_id,
                        link.upstream_kind,
                        dumps(link.upstream_ref),
                        dumps(link.marker),
                        now,
                        now,
                        None,
                        0,
                        None,
                    ),
                )
                return link, "created"
            old = link_from_row(row)
            updated_at = max(now, old.updated_at + 1)  # strictly increasing: it is the CAS token
            if old.source() == link.source():
                conn.execute(
                    "UPDATE upstream_links SET updated_at = ?, miss_count = 0, miss_link_updated_at = NULL"
                    " WHERE session_key = ? AND agent_id = ?",
                    (updated_at, link.session_key, link.agent_id),
                )
                old.updated_at, old.miss_count, old.miss_link_updated_at = updated_at, 0, None
                return old, "same"
            conn.execute(
                "UPDATE upstream_links SET catalog_id = ?, host_id = ?, thread_id = ?, upstream_kind = ?,"
                " upstream_ref_json = ?, last_marker_json = ?, last_scanned_at = NULL, miss_count = 0,"
                " miss_link_updated_at = NULL, updated_at = ? WHERE session_key = ? AND agent_id = ?",
                (
                    link.catalog_id,
                    link.host_id,
                    link.thread_id,
                    link.upstream_kind,
                    dumps(link.upstream_ref),
                    dumps(link.marker),
                    updated_at,
                    link.session_key,
                    link.agent_id,
                ),
            )
            link.created_at, link.updated_at, link.last_scanned_at = old.created_at, updated_at, None
            link.miss_count, link.miss_link_updated_at = 0, None
            return link, "rebased"

    def get_link(self, session_key: str, agent_id: str) -> Link | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {LINK_COLS} FROM upstream_links WHERE session_key = ? AND agent_id = ?",
                (session_key, agent_id),
            ).fetchone()
        return None if row is None else link_from_row(row)

    def links(self, catalog_id: str | None = None) -> list[Link]:
        sql = f"SELECT {LINK_COLS} FROM upstream_links"
        args: tuple[Any, ...] = ()
        if catalog_id is not None:
            sql += " WHERE catalog_id = ?"
            args = (catalog_id,)
        with self._lock:
            return [link_from_row(r) for r in self._conn.execute(sql + " ORDER BY session_key, agent_id", args)]

    def watched_links(self) -> list[Link]:
        with self._lock:
            return [
                link_from_row(r)
                for r in self._conn.execute(
                    f"SELECT {LINK_COLS} FROM upstream_links l WHERE EXISTS"
                    " (SELECT 1 FROM cursors c WHERE c.target = l.session_key) ORDER BY session_key, agent_id"
                )
            ]

    def advance_link(
        self, session_key: str, agent_id: str, expected_updated_at: int, marker: dict[str, Any], now: int
    ) -> bool:
        with self._tx() as conn:
            return (
                conn.execute(
                    "UPDATE upstream_links SET last_marker_json = ?, last_scanned_at = ?,"
                    " updated_at = max(?, updated_at + 1), miss_count = 0, miss_link_updated_at = NULL"
                    " WHERE session_key = ? AND agent_id = ? AND updated_at = ?",
                    (dumps(marker), now, now, session_key, agent_id, expected_updated_at),
                ).rowcount
                > 0
            )

    def set_link_misses(self, session_key: str, agent_id: str, expected_updated_at: int, count: int) -> bool:
        with self._tx() as conn:
            return (
                conn.execute(
                    "UPDATE upstream_links SET miss_count = ?, miss_link_updated_at = ?"
                    " WHERE session_key = ? AND agent_id = ? AND updated_at = ?",
                    (count, expected_updated_at if count else None, session_key, agent_id, expected_updated_at),
                ).rowcount
                > 0
            )

    def delete_link(self, session_key: str, agent_id: str, expected_updated_at: int | None = None) -> bool:
        with self._tx() as conn:
            if expected_updated_at is None:
                return (
                    conn.execute(
                        "DELETE FROM upstream_links WHERE session_key = ? AND agent_id = ?", (session_key, agent_id)
                    ).rowcount
                    > 0
                )
            return (
                conn.execute(
                    "DELETE FROM upstream_links WHERE session_key = ? AND agent_id = ? AND updated_at = ?",
                    (session_key, agent_id, expected_updated_at),
                ).rowcount
                > 0
            )

    def put_node(self, node: Node) -> Node:
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO nodes (node_id, url, token, created_at, updated_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, token = excluded.token,"
                " updated_at = excluded.updated_at",
                (node.node_id, node.url, node.token, node.created_at, node.updated_at),
            )
        return self.get_node(node.node_id) or node

    def get_node(self, node_id: str) -> Node | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT node_id, url, token, created_at, updated_at FROM nodes WHERE node_id = ?", (node_id,)
            ).fetchone()
        return None if row is None else Node(*row)

    def nodes(self) -> list[Node]:
        with self._lock:
            return [
                Node(*r)
                for r in self._conn.execute(
                    "SELECT node_id, url, token, created_at, updated_at FROM nodes ORDER BY node_id"
                )
            ]
