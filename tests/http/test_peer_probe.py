"""The servers ask the socket itself whether a client is still there before a drain or an MCP answer
counts as delivered (serving/peer.py): the event loop can be behind the kernel on a busy machine, and an
answer acknowledged in that gap is a notice lost.

Each case is a real loopback connection whose client has already acted (closed, reset, or not) before
the server's event loop accepts it; the probe runs in ``data_received``, when the loop has read the
request but not yet taken in what came after it, so only the socket can tell."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable

import pytest
import uvloop  # a dependency off Windows: uvicorn runs the servers on it

from sessionwatch.serving.peer import socket_closed_by_peer

LOOPS = ["asyncio", "uvloop"]


def _probe_at_request(client_acts: Callable[[socket.socket], None], loop_name: str) -> tuple[bool, bool]:
    """(what the probe says, whether the transport already knew it was closing), at the moment the
    server's loop reads the request of a client that sent it and then did ``client_acts``."""
    seen: list[tuple[bool, bool]] = []

    class Probing(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            if not seen:
                seen.append((socket_closed_by_peer(self.transport), self.transport.is_closing()))

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Probing, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # the client connects (the kernel's backlog takes it), sends and acts before the loop accepts
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(b"POST /v1/sessions/x/system-events/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        client_acts(client)
        for _ in range(500):
            if seen:
                break
            await asyncio.sleep(0.01)
        if client.fileno() >= 0:
            client.close()
        server.close()
        await server.wait_closed()

    if loop_name == "uvloop":
        uvloop.run(main())
    else:
        asyncio.run(main())
    assert seen, "the server never read the request"
    return seen[0]


def _close(client: socket.socket) -> None:
    client.close()  # a FIN: nothing unread on the client's side


def _reset(client: socket.socket) -> None:
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # an RST


def _stay(client: socket.socket) -> None:
    pass  # still connected, waiting for the answer


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_client_that_closed_after_its_request_is_gone_before_the_loop_knows(loop_name: str) -> None:
    gone, loop_knew = _probe_at_request(_close, loop_name)
    assert gone
    assert not loop_knew  # what the ASGI disconnect check alone would have missed at this moment


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_client_that_reset_the_connection_is_gone(loop_name: str) -> None:
    assert _probe_at_request(_reset, loop_name)[0]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_client_waiting_for_its_answer_is_there(loop_name: str) -> None:
    assert _probe_at_request(_stay, loop_name) == (False, False)


def test_the_servers_protocol_hands_each_request_the_probe() -> None:
    """What serve, node and the MCP server run (``uvicorn_config``): each request's scope carries the probe,
    and it says the client is there while it waits for the answer."""
    import threading
    import time

    import httpx
    import uvicorn

    from sessionwatch.serving.limits import uvicorn_config
    from sessionwatch.serving.peer import PEER_CLOSED

    said: list[object] = []

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        probe = (scope.get("extensions") or {}).get(PEER_CLOSED)
        said.append(probe() if callable(probe) else "no probe")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        port = sock.getsockname()[1]
        for _ in range(200):
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 204
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert said == [False]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
