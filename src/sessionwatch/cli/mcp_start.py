"""``sessionwatch mcp`` on stdio, the way a host starts it: without click when the command line is plain
(the host is waiting for the handshake), and the same start-up from the click command otherwise.

The fast path understands ``[--store URL | --gateway URL] [--token T] [--log-level L] [--json] mcp
[--session KEY] [--agent ID] [--notice-poll S] [--transport stdio]`` and their environment variables (without
``--session``: a host's session id in the environment, or a host whose calls name their session); any
other command line (``--help``, ``--transport http``, a typo, a malformed key) goes to click, with its
usual help and errors.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server import Server

    from ..mcpserver.binding import SessionBinding
    from ..mcpserver.routing import RoutedBinding

GLOBAL_VALUES = {"--store": "store", "--gateway": "gateway", "--token": "token", "--log-level": "log_level"}
MCP_VALUES = {"--session": "session", "--agent": "agent", "--notice-poll": "notice_poll", "--transport": "transport"}
LEVELS = ("debug", "info", "warning", "error")


def _take(args: list[str], i: int, names: dict[str, str], out: dict[str, str]) -> int | None:
    """Read the value option at args[i] (``--x v`` or ``--x=v``); the index after it, or None."""
    name, eq, value = args[i].partition("=")
    if name not in names:
        return None
    if not eq:
        if i + 1 >= len(args):
            return None
        value = args[i + 1]
        i += 1
    out[names[name]] = value
    return i + 1


def parse(args: list[str]) -> dict[str, str] | None:
    """The options of a plain stdio ``mcp`` command line, or None."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] != "mcp":
        if args[i] == "--json":
            i += 1
            continue
        nxt = _take(args, i, GLOBAL_VALUES, opts)
        if nxt is None:
            return None
        i = nxt
    if i >= len(args):
        return None
    i += 1
    while i < len(args):
        nxt = _take(args, i, MCP_VALUES, opts)
        if nxt is None:
            return None
        i = nxt
    if opts.get("transport", "stdio") != "stdio":
        return None
    if "session" not in opts:  # started by a host without a key: the host names the session
        where = own_session(opts.get("agent"))
        if where is None:  # or each call names its session (OpenCode's plugin): routing.py
            from ..hosts.identity import calls_name_the_session

            host = calls_name_the_session()
            if host is None:
                return None
            opts["host"] = host
        elif where:  # Claude Code: its session id makes the key
            opts["session"] = where
            opts.pop("agent", None)
    if opts.get("log_level", "warning") not in LEVELS:
        return None
    try:
        if float(opts.get("notice_poll", "1")) < 0:
            return None
        from ..keys import check_agent_id, parse_key

        if "session" in opts:
            parse_key(opts["session"], "--session")
        if "agent" in opts:
            check_agent_id(opts["agent"], "--agent")
    except Exception:  # noqa: BLE001 - anything doubtful: click says it properly
        return None
    return opts


def own_session(agent: str | None) -> str | None:
    """The session a host that started this server without a key names: its key, "" when the host names
    it only later (in each call: a late binding), None when no host we know started it."""
    from ..hooks.push import serving_channel
    from ..hosts.identity import mcp_session_key

    channel = serving_channel()
    if channel is not None:
        key = channel.own_session(agent)
        if key is not None:
            return key
        if channel.binds_late:
            return ""
    return mcp_session_key(agent)  # a room's variable naming the session (the Pi and OpenCode watchers)


def run_fast(args: list[str]) -> bool:
    """Serve when ``args`` is a plain stdio ``mcp`` command line; False (nothing done) otherwise."""
    opts = parse(args)
    if opts is None:
        return False
    logging.basicConfig(
        level=opts.get("log_level", "warning").upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    gateway = opts.get("gateway", os.environ.get("SESSIONWATCH_GATEWAY")) or None
    store = opts.get("store", os.environ.get("SESSIONWATCH_STORE")) or None
    token = opts.get("token", os.environ.get("SESSIONWATCH_TOKEN")) or None
    from ..errors import SessionwatchError
    from ..exitcodes import ERROR, exit_code_for

    try:
        serve(
            store=store,
            gateway=gateway,
            token=token,
            session_key=opts.get("session"),
            agent_id=opts.get("agent"),
            host=opts.get("host"),
            notice_poll=float(opts.get("notice_poll", "1")),
        )
    except SessionwatchError as exc:  # as the click command line says it (stdout is the protocol)
        print(f"error ({exc.code}): {exc}", file=sys.stderr)
        sys.exit(exit_code_for(exc))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        logging.getLogger("sessionwatch.cli").debug("unexpected error", exc_info=True)
        print(f"error (internal): {exc.__class__.__name__}: {exc}", file=sys.stderr)
        sys.exit(ERROR)
    return True


def serve(
    *,
    store: str | None,
    gateway: str | None,
    token: str | None,
    session_key: str | None,
    agent_id: str | None,
    notice_poll: float,
    host: str | None = None,
) -> None:
    """Serve on stdio, answering the handshake while the store opens, and loading the SDK only for a
    request the handshake table does not cover (a failed start raises, as the store or the session did).
    ``SESSIONWATCH_MCP_QUICKSTART=0``: load the SDK at once and answer everything with it.
    ``session_key`` None: the host that started the server names the session in its calls (a late
    binding; ``agent_id`` is then the agent of that key); with ``host``, the host started it for all its
    sessions, each call naming its own (``agent_id``: the agent of their keys)."""
    from ..mcpserver.quickstart import serve_stdio

    def prepare() -> SessionBinding | RoutedBinding:
        """What happens at start-up whatever the client asks: the store opened, the session bound and
        made, the pusher started (none of it needs the MCP SDK)."""
        from ..hooks.push import serving_channel, start_pusher
        from ..mcpserver.binding import SessionBinding
        from .backend import Backend

        backend = Backend.open(store=store, gateway=gateway, token=token, timers=True)
        if host is not None:
            from ..mcpserver.routing import RoutedBinding

            return RoutedBinding(backend, host, agent_id)
        channel = serving_channel()
        if session_key is None:
            binding = SessionBinding(backend, None, late=channel, late_agent=agent_id)
        else:
            binding = SessionBinding(backend, session_key, agent_id)
        binding.ensure_session()
        # started by a host with a push channel: new notices also reach the session between prompts
        start_pusher(
            gateway or store or "default",
            binding.claimed,
            lambda key: backend.peek_system_events(key, agent_id=binding.agent_id),
            backend,
            channel,
        )
        return binding

    def make(binding: SessionBinding | RoutedBinding) -> Server:
        from ..mcpserver.server import build_server  # the MCP SDK: loaded only once a request needs it

        return build_server(binding, poll_interval=notice_poll)

    serve_stdio(session_key, prepare, make, quick=os.environ.get("SESSIONWATCH_MCP_QUICKSTART", "1") != "0")
