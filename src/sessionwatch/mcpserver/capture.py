"""Capture what the SDK server answers to the handshake, for ``handshake.json``.

    python -m sessionwatch.mcpserver.capture          # print the table
    python -m sessionwatch.mcpserver.capture --write  # write it beside handshake.py

Runs the real server (``server.build_server`` on a throwaway SQLite store) over in-memory stdio streams
and sends each handshake request once per protocol version the SDK speaks. The instructions and the
tools are kept as ``null`` (``handshake.Handshake`` fills them in); everything else is the SDK's.
Re-run it after moving the ``mcp`` pin; a test says when the table is stale.
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from .handshake import LISTEN_ACK, SUBSCRIPTION_ID, TABLE, VERSION_META, stamp_version

PLACEHOLDER_KEY = "agent:capture:main"
LIST_CHANGES = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")  # what a listen may ask
CLIENT = {"name": "sessionwatch-capture", "version": "1"}


class _Lines:
    """An async line source for ``stdio_server(stdin=...)``: the lines, then a pause for the answers."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __aiter__(self) -> Any:
        return self._gen()

    async def _gen(self) -> Any:
        for line in self.lines:
            yield line + "\n"
        await anyio.sleep_forever()


class _Collect:
    def __init__(self, expected: int) -> None:
        self.lines: list[str] = []
        self.expected = expected  # answers to wait for: lines with an id, and a listen's acknowledgement
        self.done = anyio.Event()

    async def write(self, text: str) -> None:
        self.lines.append(text)
        if sum(1 for line in self.lines if '"id"' in line or LISTEN_ACK in line) >= self.expected:
            self.done.set()

    async def flush(self) -> None:
        pass


def exchange(messages: list[dict[str, Any]], session_key: str = PLACEHOLDER_KEY) -> list[dict[str, Any]]:
    """Send ``messages`` to a fresh SDK server bound to ``session_key``; its answers, in order (a
    ``subscriptions/listen`` is answered by its acknowledgement; its stream stays open)."""
    from ..engine import Gateway
    from .binding import SessionBinding
    from .server import build_server

    expected = sum(1 for m in messages if "id" in m)
    with tempfile.TemporaryDirectory() as tmp:
        gw = Gateway.open(f"sqlite:///{Path(tmp) / 'capture.db'}", timers=False)
        try:
            binding = SessionBinding(gw, session_key)
            binding.ensure_session()
            server = build_server(binding, poll_interval=0)
            out = _Collect(expected)

            async def main() -> None:
                async with anyio.create_task_group() as tg:

                    async def serve() -> None:
                        async with stdio_server(stdin=_Lines([json.dumps(m) for m in messages]), stdout=out) as (r, w):  # type: ignore[arg-type]
                            await server.run(r, w, server.create_initialization_options())

                    tg.start_soon(serve)
                    with anyio.fail_after(30):
                        await out.done.wait()
                    tg.cancel_scope.cancel()

            anyio.run(main)
        finally:
            gw.close()
    return [json.loads(line) for line in out.lines]


def _meta(version: str) -> dict[str, Any]:
    return {
        VERSION_META: version,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def capture() -> dict[str, Any]:
    answers: dict[str, dict[str, Any]] = {
        "initialize": {},
        "server/discover": {},
        "tools/list": {},
        "resources/list": {},
        "ping": {},
        "subscriptions/listen": {},
    }

    def keep(method: str, version: str, response: dict[str, Any]) -> None:
        body = {k: v for k, v in response.items() if k not in ("jsonrpc", "id")}
        result = body.get("result")
        for filled in ("instructions", "tools", "resources"):  # filled in at run time (handshake.Handshake)
            if isinstance(result, dict) and filled in result:
                result[filled] = None
        stamp_version(body, None)
        answers[method][version] = body

    for v in HANDSHAKE_PROTOCOL_VERSIONS:
        init = {"protocolVersion": v, "capabilities": {}, "clientInfo": CLIENT}
        got = exchange(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
            ]
        )
        by_id = {r.get("id"): r for r in got}
        keep("initialize", v, by_id[1])
        keep("tools/list", v, by_id[2])
        keep("ping", v, by_id[3])
        keep("resources/list", v, by_id[4])
    for v in MODERN_PROTOCOL_VERSIONS:
        listen = {"_meta": _meta(v), "notifications": dict.fromkeys(LIST_CHANGES, True)}
        got = exchange(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": _meta(v)}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": _meta(v)}},
                {"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": listen},
                {"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {"_meta": _meta(v)}},
            ]
        )
        by_id = {r.get("id"): r for r in got}
        keep("server/discover", v, by_id[1])
        keep("tools/list", v, by_id[2])
        keep("resources/list", v, by_id[4])
        (ack,) = [r for r in got if r.get("method") == LISTEN_ACK]
        ack = {field: value for field, value in ack.items() if field != "jsonrpc"}
        ack["params"]["_meta"][SUBSCRIPTION_ID] = None  # the listen's own id, filled in at run time
        answers["subscriptions/listen"][v] = ack
    # An answer that is an error (ping on the modern wire) is the SDK's to give: keep only results.
    for method in answers:
        answers[method] = {v: a for v, a in answers[method].items() if "result" in a or "params" in a}
    return {"mcp": dist_version("mcp"), "answers": answers}


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    text = render(capture())
    if "--write" in sys.argv[1:]:
        TABLE.write_text(text, encoding="utf-8")
        print(f"wrote {TABLE}", file=sys.stderr)
    else:
        sys.stdout.write(text)
