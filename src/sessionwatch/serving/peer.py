"""Is the client of a request still there? Asked before an answer counts as delivered.

The ASGI way (a ``receive`` that returns ``http.disconnect``) reports what the event loop has taken in,
and on a busy machine the loop can be a few turns behind the kernel: the client's close is already on
the socket while ``receive`` still says nothing. A drain acknowledged in that gap is a notice lost, so
the servers' protocol (``serving/limits.py``) puts a probe of the socket itself into each request's scope
(``scope["extensions"][PEER_CLOSED]``), and ``client_gone`` asks both.

The probe counts a peer that shut its side (FIN), reset the connection, or left an error on the socket.
uvicorn closes a connection on the client's FIN too, so a half-closed client never gets an answer anyway.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from starlette.types import Receive, Scope

PEER_CLOSED = "sessionwatch.peer_closed"
_HUNG_UP = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR


def socket_closed_by_peer(transport: Any) -> bool:
    """Has the other end closed or reset this connection, as far as the kernel knows? Never waits."""
    if transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return sock is not None  # a socket already closed here; no socket at all: nothing to ask
    if hasattr(select, "POLLRDHUP"):  # Linux: the peer's FIN shows even behind unread bytes
        poller = select.poll()
        poller.register(fd, select.POLLIN | _HUNG_UP)
        return any(events & _HUNG_UP for _, events in poller.poll(0))
    return _peeks_end(fd)


def _peeks_end(fd: int) -> bool:
    """Elsewhere: peek one byte without taking it; an empty read is the peer's FIN."""
    probe = socket.socket(fileno=fd)  # the same descriptor, detached below: nothing is closed or read
    try:
        return probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    finally:
        probe.detach()


def probe_for(transport: Any) -> Callable[[], bool]:
    return lambda: socket_closed_by_peer(transport)


async def client_gone(scope: Scope, receive: Receive) -> bool:
    """Has the client of this request disconnected? What the socket says, else what the server has seen;
    never waits for the client."""
    probe = (scope.get("extensions") or {}).get(PEER_CLOSED)
    if probe is not None and probe():
        return True
    # Then what the server has seen (all there is under a server without the probe): let the event loop
    # take in a close the kernel already has (reading the EOF, closing the transport and reporting it are
    # three turns of the loop).
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    with anyio.CancelScope() as cancelled:
        cancelled.cancel()
        message = await receive()
        return bool(message.get("type") == "http.disconnect")
    return False
