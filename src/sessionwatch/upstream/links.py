"""Link helpers: the source key, host ids and the public JSON shape of a link."""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import InvalidArgument
from ..store.records import Link, dumps

LOCAL_HOST = "gateway:local"
NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def source_key(host_id: str, thread_id: str, upstream_ref: dict[str, Any]) -> str:
    """First 16 hex of sha256(hostId NUL threadId NUL JSON(ref)): a rebased source never dedupes
    against the old one even when their activity ids (byte offsets) collide."""
    import hashlib  # here, not at the top: the hook's link lookup never needs it

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


def thread_links(
    store: Any, catalog_id: str, thread_id: str | None = None, file_path: str | None = None
) -> list[dict[str, Any]]:
    """The links of one catalog thread, newest first: by thread id (any host), or by the transcript file
    of a local link (what a hook reports as its ``session_id`` and ``transcript_path``). Light on imports:
    the hook command calls it on every run."""
    real = os.path.realpath(file_path) if file_path else None
    found = []
    for link in store.links(catalog_id):
        if thread_id is not None and link.thread_id == thread_id:
            found.append(link)
        elif real is not None and link.host_id == LOCAL_HOST:
            path = link.upstream_ref.get("filePath")
            if isinstance(path, str) and os.path.realpath(path) == real:
                found.append(link)
    found.sort(key=lambda x: -x.updated_at)
    return [x.to_json() for x in found]
