"""The MCP handshake, answered without the MCP SDK: ``initialize``, ``server/discover``, ``tools/list`` and
``ping``, exactly as the SDK server answers them.

The answers are not written by hand: ``handshake.json`` holds what the SDK server itself answered to
each of these requests, per protocol version (``python -m sessionwatch.mcpserver.capture`` writes it;
a test fails when the installed SDK would answer differently). Filled in here: the instructions (they
name the bound session), the tools (the engine's, ``texts.tools_json``) and our version. A request the
table does not cover (another protocol version, a cursor, any other method) gets ``None``: the SDK
answers it once it has loaded.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from .. import __version__
from .texts import instructions, tools_json

TABLE = Path(__file__).with_name("handshake.json")
VERSION_META = "io.modelcontextprotocol/protocolVersion"  # the per-request version (2026-07-28 and on)


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
        elif method in ("tools/list", "ping"):
            if set(params) - {"_meta"}:  # a cursor or anything else: the SDK's
                return None
            version = version or self.agreed
            if version is None or version not in answers.get(method, {}):
                return None
            result = self._result(method, version)
        else:
            return None
        if result is None:
            return None
        return {"jsonrpc": "2.0", "id": rid, **result}

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
        stamp_version(out, __version__)
        return dict(out)
