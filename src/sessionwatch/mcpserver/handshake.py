"""The MCP handshake, answered without the MCP SDK: ``initialize``, ``server/discover``, ``tools/list``,
``resources/list``, ``ping`` and a ``subscriptions/listen`` for list changes only, exactly as the SDK
server answers them.

The answers are not written by hand: ``handshake.json`` holds what the SDK server itself answered to
each of these requests, per protocol version (``python -m sessionwatch.mcpserver.capture`` writes it;
a test fails when the installed SDK would answer differently). Filled in here: the instructions (they
name the bound session), the tools (the engine's, ``texts.tools_json``), the resources (the bound
session's notices, ``texts.notices_resource_json``: known once the store is open, ``Handshake.bind``)
and our version. A request the table does not cover (another protocol version, a cursor, any other
method) gets ``None``: the SDK answers it once it has loaded.

A listen (2026-07-28: Claude Code opens one at start for tool and resource list changes) is answered by
its acknowledgement, as the SDK's handler does, and then stays open without another frame: this server
never publishes a list change, so the SDK's stream would carry nothing more either. A listen that names
resources (the notices feed counts those streams) is the SDK's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from .. import __version__
from .texts import instructions, notices_resource_json, tools_json

TABLE = Path(__file__).with_name("handshake.json")
VERSION_META = "io.modelcontextprotocol/protocolVersion"  # the per-request version (2026-07-28 and on)
LISTEN_ACK = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


@cache
def table() -> dict[str, Any]:
    return dict(json.loads(TABLE.read_text(encoding="utf-8")))


def stamp_version(node: Any, version: str | None) -> None:
    """Set the version of every server-info object (``{"name": "sessionwatch", "version"}``) in ``node``."""
    if isinstance(node, dict):
        if node.get("name") == "sessionwatch" and "version" in node:
            node["version"] = version
        for value in node.values():
            stamp_version(value, version)
    elif isinstance(node, list):
        for value in node:
            stamp_version(value, version)


class Handshake:
    """Answers for one connection: remembers the version ``initialize`` agreed on, for ``tools/list``."""

    def __init__(self, session_key: str | None) -> None:
        self.session_key = session_key
        self.agreed: str | None = None  # the handshake-era version, once initialize was answered
        self._bound: Callable[[], str | None] | None = None

    def bind(self, key: Callable[[], str | None]) -> None:
        """The store is open and the session bound: ``resources/list`` is answered from now on (``key()``:
        the bound session's key at the time, None while the server has none)."""
        self._bound = key

    def waits(self, message: Any) -> bool:
        """Whether ``message`` is one the table answers only once the session is bound (``bind``)."""
        return self._bound is None and isinstance(message, dict) and message.get("method") == "resources/list"

    def answer(self, message: Any) -> dict[str, Any] | None:
        """The JSON-RPC response to ``message``, or None when the SDK must answer it."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
            return None
        method, params, rid = message.get("method"), message.get("params"), message["id"]
        if not isinstance(method, str) or (params is not None and not isinstance(params, dict)):
            return None
        params = params or {}
        meta = params.get("_meta")
        version = meta.get(VERSION_META) if isinstance(meta, dict) else None
        answers = table()["answers"]
        if method == "initialize":
            version = params.get("protocolVersion")
            if version is None or version not in answers.get("initialize", {}):
                return None
            result = self._result("initialize", version)
            self.agreed = version
        elif method == "server/discover":
            if version is None or version not in answers.get("server/discover", {}):
                return None
            result = self._result("server/discover", version)
        elif method in ("tools/list", "resources/list", "ping"):
            if method == "resources/list" and self._bound is None:
                return None
            if set(params) - {"_meta"}:  # a cursor or anything else: the SDK's
                return None
            version = version or self.agreed
            if version is None or version not in answers.get(method, {}):
                return None
            result = self._result(method, version)
        elif method == "subscriptions/listen":
            return self._listen_ack(rid, version, params)
        else:
            return None
        if result is None:
            return None
        return {"jsonrpc": "2.0", "id": rid, **result}

    def _listen_ack(self, rid: Any, version: str | None, params: dict[str, Any]) -> dict[str, Any] | None:
        """The acknowledgement of a listen for list changes: the flags asked for (true), as honoured."""
        entry = table()["answers"].get("subscriptions/listen", {}).get(version)
        asked = params.get("notifications")
        if not isinstance(entry, dict) or not isinstance(asked, dict) or set(params) - {"_meta", "notifications"}:
            return None
        known = entry["params"]["notifications"]  # every list change the SDK honours
        if any(k not in known or not isinstance(v, bool) for k, v in asked.items()):
            return None  # resources by URI, or anything new: the SDK's
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return None
        out = copy.deepcopy(entry)
        out["params"]["_meta"][SUBSCRIPTION_ID] = rid
        out["params"]["notifications"] = {k: True for k, v in asked.items() if v}
        return {"jsonrpc": "2.0", **out}

    def _result(self, method: str, version: str) -> dict[str, Any] | None:
        entry = table()["answers"][method].get(version)
        if not isinstance(entry, dict):
            return None
        out = copy.deepcopy(entry)
        body = out.get("result")
        if isinstance(body, dict) and "instructions" in body:
            body["instructions"] = instructions(self.session_key)
        if isinstance(body, dict) and "tools" in body:
            body["tools"] = tools_json()
        if isinstance(body, dict) and "resources" in body:
            key = self._bound() if self._bound is not None else None
            body["resources"] = [notices_resource_json(key)] if key else []
        stamp_version(out, __version__)
        return dict(out)
