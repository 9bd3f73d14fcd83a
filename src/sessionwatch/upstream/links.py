"""Link helpers: the source key, host ids and the public JSON shape of a link."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..errors import InvalidArgument
from ..store.records import Link, dumps

LOCAL_HOST = "gateway:local"
NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def source_key(host_id: str, thread_id: str, upstream_ref: dict[str, Any]) -> str:
    """First 16 hex of sha256(hostId NUL threadId NUL JSON(ref)): a rebased source never dedupes
    against the old one even when their activity ids (byte offsets) collide."""
    raw = f"{host_id}\0{thread_id}\0{dumps(upstream_ref)}"
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def link_source_key(link: Link) -> str:
    return source_key(link.host_id, link.thread_id, link.upstream_ref)


def link_json(link: Link) -> dict[str, Any]:
    out = link.to_json()
    out["sourceKey"] = link_source_key(link)
    return out


def check_node_id(value: object) -> str:
    if not isinstance(value, str) or NODE_ID.fullmatch(value) is None:
        raise InvalidArgument(f"nodeId must match {NODE_ID.pattern}, got {value!r}")
    return value


def parse_host(value: object) -> str | None:
    """``gateway:local`` -> None; ``node:<nodeId>`` -> the node id; anything else is refused."""
    if value == LOCAL_HOST:
        return None
    if isinstance(value, str) and value.startswith("node:"):
        return check_node_id(value[5:])
    raise InvalidArgument(f"hostId must be {LOCAL_HOST!r} or 'node:<nodeId>', got {value!r}")


def expected(link: Link) -> tuple[int, str]:
    """The recording pre-condition for this exact link row (see EventInput.expected_link)."""
    return link.updated_at, dumps(link.upstream_ref)
