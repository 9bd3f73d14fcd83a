"""Long-running commands: serve (HTTP gateway), mcp (MCP server), node (paired-node transcripts)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ..hosts.registry import ROOMS
from ..serving.options import click_options, gateway_options, token_limit_options
from .app import State, cli, command, pass_state

F = TypeVar("F", bound=Callable[..., Any])


def served_roots(f: F) -> F:
    """A node's --claude-root, --codex-root, ...: the place of every room whose transcripts a node serves."""
    for room in reversed([r for r in ROOMS.values() if r.place is not None and r.place.served]):
        assert room.place is not None
        f = click.option(room.place.flag, room.place.option, type=click.Path(file_okay=False), help=room.place.help)(f)
    return f


@command(cli, "serve")
@gateway_options
@pass_state
def serve_cmd(state: State, **options: Any) -> None:
    """Run the HTTP gateway (blocking). The options, their environment variables and defaults are
    those of 'python -m sessionwatch.http' (docs/http.md).

    Listening beyond loopback needs --token or --token-file (exit 4 otherwise). Without --store here,
    the global --store (or SESSIONWATCH_STORE) names the store.

    \b
    Examples:
      sessionwatch serve
      sessionwatch serve --port 9000 --store sqlite:////var/lib/sessionwatch/state.db
      sessionwatch token > ~/.sessionwatch-token && chmod 600 ~/.sessionwatch-token
      sessionwatch serve --host 0.0.0.0 --token-file ~/.sessionwatch-token --allowed-host gw.example.org
      sessionwatch serve --store postgresql://postgres@127.0.0.1:5432/sessionwatch
    """
    from ..http.options import run

    ctx = click.get_current_context()
    if ctx.get_parameter_source("store") is not ParameterSource.COMMANDLINE:
        options["store"] = state.store  # the global --store, or the same SESSIONWATCH_STORE
    run(**options)


@command(cli, "mcp")
@click.option(
    "--session",
    "session_key",
    metavar="KEY",
    help="The caller session every tool call runs as (created when missing). Default, when Claude Code "
    "starts the server: agent:AGENT:claude:<its session id> (AGENT: --agent, else the project folder's name); "
    "when OpenCode starts it (SESSIONWATCH_SESSION_PER_CALL=opencode), each call's own session, which sessionwatch's "
    "OpenCode plugin names.",
)
@click.option(
    "--agent",
    "agent_id",
    metavar="AGENT_ID",
    help="Agent of the session: of the key made from Claude Code's session id without --session; with "
    "--session, only for bare 'global'.",
)
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP transport: interface.")
@click.option("--port", type=click.IntRange(0, 65535), default=7879, show_default=True, help="HTTP transport: port.")
@click.option("--path", default="/mcp", show_default=True, help="HTTP transport: endpoint path.")
@click.option(
    "--http-token",
    metavar="TOKEN",
    help="HTTP transport: bearer token clients must send; required beyond loopback. Env: SESSIONWATCH_MCP_TOKEN.",
)
@click_options(token_file_env="SESSIONWATCH_MCP_TOKEN_FILE", token_file_option="--http-token-file")
@token_limit_options
@click.option(
    "--notice-poll",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="While a client subscribes to the notices resource, re-check it this often besides wakes (0: wakes only).",
)
@pass_state
def mcp_cmd(
    state: State,
    session_key: str | None,
    agent_id: str | None,
    transport: str,
    host: str,
    port: int,
    path: str,
    http_token: str | None,
    token_file: str | None,
    allowed_host: tuple[str, ...],
    allowed_origin: tuple[str, ...],
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
    fd: int | None,
    max_token_streams: int,
    max_token_connections: int,
    admin_reserve: int,
    revocation_poll: float,
    notice_poll: float,
) -> None:
    """Serve the six sessionwatch tools over MCP, bound to caller session KEY.

    Pending notices for KEY ride along in every tool result (as 'System: ...' lines
    and a systemEvents list), so the agent learns it is stale on its next call.
    The resource sessionwatch://sessions/KEY/notices lists them without consuming
    them; subscribed clients are told when it changes. Uses the local store, or the
    gateway given with --gateway/--token. Logs go to stderr only; on stdio, stdout
    is the protocol.

    \b
    Examples:
      sessionwatch mcp --session agent:main:main
      sessionwatch --store sqlite:////srv/sw.db mcp --session agent:main:main
      sessionwatch --gateway http://127.0.0.1:7878 --token $T mcp --session agent:main:main
      sessionwatch mcp --session agent:main:main --transport http --port 7879
      claude mcp add sessionwatch -- sessionwatch mcp --session agent:main:main
    """
    from ..mcpserver import SessionBinding, build_server, run_http
    from ..serving.exposure import check_exposure, resolve_token

    routed_host: str | None = None  # the host whose calls name their session (no one key)
    if session_key is None:
        from ..hosts.identity import calls_name_the_session
        from .mcp_start import own_session

        found = own_session(agent_id)
        if found is None:
            routed_host = calls_name_the_session()
        if (found is None and routed_host is None) or (not found and transport != "stdio"):
            raise click.UsageError(
                "give --session KEY (a server a host starts finds its session by itself: Claude Code names it "
                "in CLAUDE_CODE_SESSION_ID, Codex in each tool call, the Pi extension's and the OpenCode "
                "plugin's watchers in SESSIONWATCH_PI_SESSION_ID and SESSIONWATCH_OPENCODE_SESSION_ID, the "
                "server OpenCode starts (SESSIONWATCH_SESSION_PER_CALL=opencode, on stdio) in each call)"
            )
        session_key = found or None  # "": the host names it in its calls (Codex), a stdio server bound late
        if session_key is not None:
            agent_id = None  # it is the key's agent
    from ..serving.options import limits_of, token_limits_of
    from ..serving.origin import RequestPolicy

    policy = limits = token_limits = None
    sock: socket.socket | None = None  # --fd: the inherited listening socket
    if transport == "http":  # refuse a weak or missing token before opening anything
        if fd is not None:
            from ..serving.exposure import adopt_socket

            sock, host = adopt_socket(fd, host)
        http_token = resolve_token(
            http_token, token_file, env_token="SESSIONWATCH_MCP_TOKEN", env_file="SESSIONWATCH_MCP_TOKEN_FILE"
        )
        check_exposure(host, http_token, what="the MCP transport", option="--http-token or --http-token-file")
        try:
            policy = RequestPolicy.from_options(allowed_host, allowed_origin)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--allowed-host") from None
        limits = limits_of(header_timeout, body_timeout, max_connections)
        token_limits = token_limits_of(max_token_streams, max_token_connections, admin_reserve, revocation_poll)
    if transport == "stdio":  # the same start as the fast path: the opening answered, the SDK loaded when needed
        from .mcp_start import serve

        serve(
            store=state.store,
            gateway=state.gateway,
            token=state.token,
            session_key=session_key,
            agent_id=agent_id,
            notice_poll=notice_poll,
            host=routed_host,
        )
        return
    assert session_key is not None  # a late binding, or calls naming their session, is for stdio only (above)
    backend = state.backend(timers=True)
    binding = SessionBinding(backend, session_key, agent_id)
    binding.ensure_session()
    server = build_server(binding, poll_interval=notice_poll)
    from ..keys import agent_of

    # With --http-token, tokens of a local store's token table are accepted too (scoped ones only
    # when they cover the bound session's agent); a remote gateway's table is not reachable here.
    local = None if backend.remote else backend.target  # the engine looks stored tokens up (Gateway.token)
    run_http(
        server,
        host=host,
        port=port,
        token=http_token,
        path=path,
        policy=policy,
        limits=limits,
        token_table=(lambda: local) if local is not None else None,
        bound_agent=agent_of(session_key) or agent_id,
        sock=sock,
        token_limits=token_limits,
    )


@command(cli, "node")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--token",
    "node_token",
    metavar="TOKEN",
    help="Bearer token the gateway must send (give the same to 'pair'); at least 16 characters beyond "
    "loopback. Shows in 'ps': prefer --token-file. Env: SESSIONWATCH_NODE_TOKEN.",
)
@click_options(token_file_env="SESSIONWATCH_NODE_TOKEN_FILE")
@served_roots
@pass_state
def node_cmd(
    state: State,
    host: str,
    port: int,
    node_token: str | None,
    token_file: str | None,
    allowed_host: tuple[str, ...],
    allowed_origin: tuple[str, ...],
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
    fd: int | None,
    **roots: str | None,
) -> None:
    """Serve this machine's Claude Code and Codex transcripts to a gateway (blocking).

    Pair it from the gateway side with: sessionwatch pair NODE_ID http://HOST:PORT --token TOKEN

    \b
    Examples:
      sessionwatch node --token "$(sessionwatch token)"
      sessionwatch node --host 0.0.0.0 --port 8765 --token-file ~/.node-token --claude-root ~/.claude
    """
    from ..node_server import node_token as resolve_node_token, serve_node
    from ..serving.options import limits_of

    serve_node(
        host,
        port,
        resolve_node_token(node_token, token_file),
        allowed_hosts=allowed_host,
        allowed_origins=allowed_origin,
        limits=limits_of(header_timeout, body_timeout, max_connections),
        fd=fd,
        **roots,
    )
