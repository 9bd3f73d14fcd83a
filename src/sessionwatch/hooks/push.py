"""Which host started this MCP server, and its push: the room whose channel says so (``hosts/push.py``),
picked through the registry, so nothing here names a host.

The session's MCP server runs the push (the host runs it as long as the session); ``start_pusher`` gives
it the session's queue, what the session's hooks have handed out and not yet seen acknowledged (in the
hook answer state of this machine, or, through a gateway, the gateway's: its hook route answers the
hooks there), and where to report an address found gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..hosts.push import Channel, Pusher, push_enabled, push_interval
from ..hosts.registry import ROOMS
from .delivery import handed_out


def serving_channel() -> Channel | None:
    """The push channel of the host that started this process (None: started by none we know)."""
    for room in ROOMS.values():
        channel = room.push_channel()
        if channel is not None and channel.serves():
            return channel
    return None


def start_pusher(
    where: str,
    session: Callable[[], str | None],
    peek: Callable[[str], Sequence[Any]],
    backend: Any,
    channel: Channel | None = None,
) -> Pusher | None:
    """The pusher of a server a host with a push channel started, else None (``SESSIONWATCH_PUSH=0``:
    never). ``backend``: the server's engine or gateway client (what was handed out, where a gone
    address is reported)."""
    if not push_enabled():
        return None
    channel = channel or serving_channel()
    if channel is None:
        return None
    pusher = Pusher(channel, where, session, peek, handed_out_of(backend), gone_of(backend), interval=push_interval())
    return pusher.start()


def handed_out_of(backend: Any) -> Callable[[str], set[int]]:
    """What the session's hooks handed out: asked of the gateway when the backend is one (its hook route
    keeps the answer state), else read from this machine's hook answer state."""
    remote = getattr(backend, "hooks_handed_out", None)
    if remote is None:
        return handed_out
    return lambda key: {int(i) for i in remote(key)["ids"]}


def gone_of(backend: Any) -> Callable[[str, int | None], object] | None:
    report = getattr(backend, "report_host_gone", None)
    if report is None:
        return None
    machine = _machine()
    return lambda key, pid: report(key, pid=pid, machine=machine) if pid is not None else None


def _machine() -> str:
    import os
    import socket

    return os.environ.get("SESSIONWATCH_MACHINE") or socket.gethostname()  # twin: engine.lifecycle.this_machine
