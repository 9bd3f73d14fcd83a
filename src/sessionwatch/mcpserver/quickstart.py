"""MCP over stdio that answers the handshake without the MCP SDK, and loads the SDK only when needed.

A host starts ``sessionwatch mcp`` and asks ``initialize`` (or ``server/discover``) and ``tools/list``
at once; Codex and Claude Code do not wait long for a server that is slow to list its tools, and the
SDK alone takes half a second or more to import (about a second of CPU on a busy machine). So the
process answers those requests itself (``handshake.Handshake``, the SDK's own answers captured into
``handshake.json``) while a thread opens the store and binds the session (``prepare``). The SDK server
(``make``) is built only when a request arrives that the table does not cover: a session whose model
never calls a tool never loads it. Then it hands over: the SDK server is fed the client's
``initialize`` again under a private id (its answer is dropped: the client already has the same one),
then every message it has not been answered yet, in the order they came, then the live stream.
Anything the table does not cover simply waits for the SDK, so the worst case is the old start-up.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar

from .handshake import Handshake

if TYPE_CHECKING:
    from mcp.server import Server

log = logging.getLogger("sessionwatch.mcp")

REPLAY_ID = "sessionwatch-quickstart-initialize"  # the id the SDK's replayed initialize runs under


P = TypeVar("P")


@dataclass
class _Prepared(Generic[P]):
    value: P


@dataclass
class _Ready:
    server: Server


@dataclass
class _Failed:
    error: BaseException


_Item = bytes | None | _Prepared[Any] | _Ready | _Failed  # a line from the client, EOF, or a loader's outcome


def _claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """Private duplicates of stdin and stdout for the wire; fd 0 then reads /dev/null and fd 1 goes to
    stderr, so nothing printed while modules load (or later) can corrupt the protocol stream."""
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


class _Wire:
    """Whole lines to the client, one writer at a time."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, line: bytes) -> None:
        with self._lock:
            self._out.write(line if line.endswith(b"\n") else line + b"\n")
            self._out.flush()


class _Source:
    """The SDK's stdin: the held lines, then the live ones, until the client closes its end."""

    def __init__(self, held: list[bytes], inbox: queue.Queue[_Item]) -> None:
        self._held = held
        self._inbox = inbox

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import anyio.to_thread

        for line in self._held:
            yield line.decode("utf-8", "replace")
        while True:
            item = await anyio.to_thread.run_sync(self._inbox.get, abandon_on_cancel=True)
            if item is None:
                return
            if isinstance(item, bytes):
                yield item.decode("utf-8", "replace")


class _Sink:
    """The SDK's stdout: every line to the client except the answer to the replayed initialize."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire
        self._dropped = False

    async def write(self, text: str) -> None:
        if not self._dropped and REPLAY_ID in text:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == REPLAY_ID:
                self._dropped = True
                return
        self._wire.send(text.encode("utf-8"))

    async def flush(self) -> None:
        pass


def serve_stdio(
    session_key: str | None, prepare: Callable[[], P], make: Callable[[P], Server], *, quick: bool = True
) -> None:
    """Blocking: serve over this process's stdin/stdout, bound to ``session_key`` (None: bound late).
    ``prepare()`` runs on a thread at once (the store, the session: what must happen at start-up) while
    the handshake is answered from the table; ``make(prepared)`` builds the SDK server once a request
    needs it (``quick=False``: at once, and nothing is answered before it is ready). Raises what either
    raised. Ends when the client closes its end, after the SDK (if loaded) answered what it was sent."""
    wire_in, wire_out = _claim_stdio()
    wire = _Wire(wire_out)
    inbox: queue.Queue[_Item] = queue.Queue()

    def read() -> None:
        try:
            for line in wire_in:
                inbox.put(line)
        except (OSError, ValueError) as exc:
            log.debug("stdin closed: %s", exc)
        inbox.put(None)

    def in_thread(name: str, fn: Callable[[], _Item]) -> None:
        def run() -> None:
            try:
                inbox.put(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the serving thread, which raises it
                inbox.put(_Failed(exc))

        threading.Thread(target=run, name=name, daemon=True).start()

    threading.Thread(target=read, name="sessionwatch-mcp-stdin", daemon=True).start()
    in_thread("sessionwatch-mcp-prepare", lambda: _Prepared(prepare()))

    handshake = Handshake(session_key)
    held: list[bytes] = []  # for the SDK, in arrival order
    waiting: list[bytes] = []  # for the table, once the session is bound (Handshake.waits)
    prepared: _Prepared[P] | None = None
    needed = not quick  # a request the table does not answer came: the SDK must load
    loading = False
    eof = False
    while True:
        if needed and prepared is not None and not loading:
            loading = True
            in_thread("sessionwatch-mcp-load", functools.partial(_load, make, prepared.value))
        if eof and prepared is not None and not needed:
            log.debug("client gone; the MCP SDK was never needed")
            return
        item = inbox.get()
        if isinstance(item, _Prepared):
            prepared = item
            handshake.bind(functools.partial(_key_of, item.value))
            for line in waiting:  # asked before the session was bound, in the order they came
                if not _answer(handshake, line, wire, held):
                    held.append(line)
                    needed = True
            waiting.clear()
            continue
        if isinstance(item, _Ready):
            server = item.server
            break
        if isinstance(item, _Failed):
            raise item.error
        if item is None:  # the client closed its end: the SDK (if needed) still answers what it sent
            eof = True
            continue
        message = _parse(item)
        if quick and handshake.waits(message):
            waiting.append(item)
            continue
        if quick and _answer(handshake, item, wire, held):
            continue
        held.append(item)
        if not isinstance(message, dict) or "id" in message or "method" not in message:
            needed = True  # a request (or a malformed line): the SDK's to answer; a notification waits
    log.debug("MCP SDK ready; %d message(s) handed over", len(held))
    if eof:
        inbox.put(None)
    _run_sdk(server, _Source(held, inbox), _Sink(wire))


def _answer(handshake: Handshake, line: bytes, wire: _Wire, held: list[bytes]) -> bool:
    """Answer ``line`` from the table if it can be; False leaves it to the SDK."""
    message = _parse(line)
    answer = handshake.answer(message)
    if answer is None:
        return False
    wire.send(json.dumps(answer, ensure_ascii=False).encode("utf-8"))
    if isinstance(message, dict) and message.get("method") == "initialize":
        # The SDK's session must see initialize too; its answer (the same) is dropped.
        held.append(json.dumps({**message, "id": REPLAY_ID}).encode("utf-8"))
    return True


def _key_of(binding: Any) -> str | None:
    """The bound session's key now (a binding's key can change: a late binding learns it)."""
    key = getattr(binding, "session_key", None)
    return key if isinstance(key, str) else None


def _load(make: Callable[[P], Server], prepared: P) -> _Ready:
    return _Ready(make(prepared))


def _run_sdk(server: Server, source: _Source, sink: _Sink) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server(stdin=source, stdout=sink) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None
