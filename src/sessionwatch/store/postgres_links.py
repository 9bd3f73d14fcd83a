"""PostgreSQL: adopted catalog links and paired nodes (a mixin of PostgresStore)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from .records import Link, Node, dumps
from .rows import LINK_COLS, link_from_row

T = TypeVar("T")


class LinksMixin:
    if TYPE_CHECKING:  # provided by PostgresStore
        def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T: ...
        def _one(self, query: str, params: Any = None) -> Any: ...
        def _all(self, query: str, params: Any = None) -> list[Any]: ...

    def upsert_link(self, link: Link, now: int) -> tuple[Link, str]:
        def work(conn: psycopg.Connection[Any]) -> tuple[Link, str]:
            with conn.transaction():
                row = conn.execute(f"SELECT {LINK_COLS} FROM upstream_links WHERE session_key = %s"
                                   " AND agent_id = %s FOR UPDATE", (link.session_key, link.agent_id)).fetchone()
                if row is None:
                    inserted = conn.execute(
                        f"INSERT INTO upstream_links ({LINK_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                        " ON CONFLICT DO NOTHING",
                        (link.session_key, link.agent_id, link.catalog_id, link.host_id, link.thread_id,
                         link.upstream_kind, dumps(link.upstream_ref), dumps(link.marker), now, now, None, 0,
                         None)).rowcount
                    if inserted:
                        link.created_at = link.updated_at = now
                        link.last_scanned_at, link.miss_count, link.miss_link_updated_at = None, 0, None
                        return link, "created"
                    # another gateway created it a moment ago: lock and treat it as existing
                    row = conn.execute(f"SELECT {LINK_COLS} FROM upstream_links WHERE session_key = %s"
                                       " AND agent_id = %s FOR UPDATE",
                                       (link.session_key, link.agent_id)).fetchone()
                    assert row is not None, "the row that blocked the insert is gone"
                old = link_from_row(row)
                updated_at = max(now, old.updated_at + 1)  # strictly increasing: it is the CAS token
                if old.source() == link.source():
                    conn.execute("UPDATE upstream_links SET updated_at = %s, miss_count = 0,"
                                 " miss_link_updated_at = NULL WHERE session_key = %s AND agent_id = %s",
                                 (updated_at, link.session_key, link.agent_id))
                    old.updated_at, old.miss_count, old.miss_link_updated_at = updated_at, 0, None
                    return old, "same"
                conn.execute(
                    "UPDATE upstream_links SET catalog_id = %s, host_id = %s, thread_id = %s, upstream_kind = %s,"
                    " upstream_ref_json = %s, last_marker_json = %s, last_scanned_at = NULL, miss_count = 0,"
                    " miss_link_updated_at = NULL, updated_at = %s WHERE session_key = %s AND agent_id = %s",
                    (link.catalog_id, link.host_id, link.thread_id, link.upstream_kind, dumps(link.upstream_ref),
                     dumps(link.marker), updated_at, link.session_key, link.agent_id))
                link.created_at, link.updated_at, link.last_scanned_at = old.created_at, updated_at, None
                link.miss_count, link.miss_link_updated_at = 0, None
                return link, "rebased"

        return self._run(work)

    def get_link(self, session_key: str, agent_id: str) -> Link | None:
        row = self._one(f"SELECT {LINK_COLS} FROM upstream_links WHERE session_key = %s AND agent_id = %s",
                        (session_key, agent_id))
        return None if row is None else link_from_row(row)

    def links(self, catalog_id: str | None = None) -> list[Link]:
        query = f"SELECT {LINK_COLS} FROM upstream_links"
        args: tuple[Any, ...] = ()
        if catalog_id is not None:
            query += " WHERE catalog_id = %s"
            args = (catalog_id,)
        return [link_from_row(r) for r in self._all(query + " ORDER BY session_key, agent_id", args)]

    def watched_links(self) -> list[Link]:
        return [link_from_row(r) for r in self._all(
            f"SELECT {LINK_COLS} FROM upstream_links l WHERE EXISTS"
            " (SELECT 1 FROM cursors c WHERE c.target = l.session_key) ORDER BY session_key, agent_id")]

    def advance_link(self, session_key: str, agent_id: str, expected_updated_at: int, marker: dict[str, Any],
                     now: int) -> bool:
        return self._run(lambda c: c.execute(
            "UPDATE upstream_links SET last_marker_json = %s, last_scanned_at = %s,"
            " updated_at = greatest(%s, updated_at + 1), miss_count = 0, miss_link_updated_at = NULL"
            " WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (dumps(marker), now, now, session_key, agent_id, expected_updated_at)).rowcount > 0)

    def set_link_misses(self, session_key: str, agent_id: str, expected_updated_at: int, count: int) -> bool:
        return self._run(lambda c: c.execute(
            "UPDATE upstream_links SET miss_count = %s, miss_link_updated_at = %s"
            " WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (count, expected_updated_at if count else None, session_key, agent_id,
             expected_updated_at)).rowcount > 0)

    def delete_link(self, session_key: str, agent_id: str, expected_updated_at: int | None = None) -> bool:
        if expected_updated_at is None:
            return self._run(lambda c: c.execute(
                "DELETE FROM upstream_links WHERE session_key = %s AND agent_id = %s",
                (session_key, agent_id)).rowcount > 0)
        return self._run(lambda c: c.execute(
            "DELETE FROM upstream_links WHERE session_key = %s AND agent_id = %s AND updated_at = %s",
            (session_key, agent_id, expected_updated_at)).rowcount > 0)

    def put_node(self, node: Node) -> Node:
        row = self._one("INSERT INTO nodes (node_id, url, token, created_at, updated_at) VALUES (%s,%s,%s,%s,%s)"
                        " ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, token = excluded.token,"
                        " updated_at = excluded.updated_at RETURNING node_id, url, token, created_at, updated_at",
                        (node.node_id, node.url, node.token, node.created_at, node.updated_at))
        return Node(*row)

    def get_node(self, node_id: str) -> Node | None:
        row = self._one("SELECT node_id, url, token, created_at, updated_at FROM nodes WHERE node_id = %s",
                        (node_id,))
        return None if row is None else Node(*row)

    def nodes(self) -> list[Node]:
        return [Node(*r) for r in self._all("SELECT node_id, url, token, created_at, updated_at FROM nodes"
                                            " ORDER BY node_id")]
