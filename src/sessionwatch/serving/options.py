"""The command-line options every sessionwatch server shares (Host/Origin allow-lists, limits, token file),
and the gateway's own (``gateway_options``).

One definition for ``python -m sessionwatch.http``, ``python -m sessionwatch.node_server`` and
the click commands ``serve``, ``node`` and ``mcp --transport http``, so they cannot drift apart. (Here,
below the faces, so that the CLI can build its commands without importing the HTTP face.)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .limits import MAX_BODY_BYTES, Limits
from .tokengate import TokenLimits

F = TypeVar("F", bound=Callable[..., Any])
DEFAULTS = Limits()
TOKEN_DEFAULTS = TokenLimits()

HOST_HELP = (
    "Also accept this Host name (name or name:port; repeatable; '*' turns the check off). "
    "Env: SESSIONWATCH_ALLOWED_HOSTS (comma-separated)."
)
ORIGIN_HELP = (
    "Accept browser requests from this Origin (scheme://host[:port]; repeatable; none by default). "
    "Env: SESSIONWATCH_ALLOWED_ORIGINS."
)
HEADER_HELP = f"Seconds a client has to send a request's headers (default {DEFAULTS.header_timeout_s:g})."
BODY_HELP = f"Seconds a client has to send a request's body after its headers (default {DEFAULTS.body_timeout_s:g})."
CONN_HELP = (
    f"Open connections at most (default {DEFAULTS.max_connections}; lowered to fit the descriptor "
    "limit). At the cap the oldest idle connection is closed, or the new one gets 503."
)


FD_HELP = (
    "Serve on an already-open listening socket, inherited as file descriptor N (systemd socket "
    "activation, tests); --host and --port are then not bound."
)

LOG_FORMAT_HELP = "Log lines as plain text or one JSON object per line (uvicorn's too). Env: SESSIONWATCH_LOG_FORMAT."


def _set_log_format(value: str | None) -> None:
    from ..logformat import configure

    configure(value)


class _LogFormatAction(argparse.Action):
    """Applies --log-format while parsing, so every server main gets it without new plumbing."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _set_log_format(values)
        setattr(namespace, self.dest, values)


def add_argparse_options(p: argparse.ArgumentParser, *, token_file_env: str) -> None:
    p.add_argument(
        "--log-format", choices=["text", "json"], default=None, action=_LogFormatAction, help=LOG_FORMAT_HELP
    )
    p.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help=f"read the bearer token from the first line of PATH (default ${token_file_env}); "
        "keeps it out of the process list",
    )
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME", help=HOST_HELP)
    p.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN", help=ORIGIN_HELP)
    p.add_argument("--header-timeout", type=float, default=DEFAULTS.header_timeout_s, metavar="S", help=HEADER_HELP)
    p.add_argument("--body-timeout", type=float, default=DEFAULTS.body_timeout_s, metavar="S", help=BODY_HELP)
    p.add_argument("--max-connections", type=int, default=DEFAULTS.max_connections, metavar="N", help=CONN_HELP)
    p.add_argument("--fd", type=int, default=None, metavar="N", help=FD_HELP)


TOKEN_STREAMS_HELP = (
    f"Open streams one scoped token may hold (default {TOKEN_DEFAULTS.streams}); beyond it that token "
    "gets 429 with Retry-After."
)
TOKEN_CONNECTIONS_HELP = (
    f"Connections one scoped token may keep busy with requests in progress, its streams included "
    f"(default {TOKEN_DEFAULTS.connections}); beyond it that token gets 429 with Retry-After."
)
ADMIN_RESERVE_HELP = (
    f"Connections scoped tokens together never get, kept for admin tokens (default "
    f"{TOKEN_DEFAULTS.admin_reserve}; at most half of --max-connections)."
)
REVOCATION_HELP = (
    f"Seconds between reads of the tokens behind open requests, streams and MCP sessions; a revoked "
    f"token's are ended at the next read (default {TOKEN_DEFAULTS.revocation_poll_s:g})."
)


def token_limit_options(fn: F) -> F:
    """Decorator adding ``max_token_streams``, ``max_token_connections``, ``admin_reserve`` and
    ``revocation_poll`` (the servers that accept the store's tokens: serve, mcp --transport http)."""
    options = [
        click.option(
            "--max-token-streams",
            type=click.IntRange(min=1),
            default=TOKEN_DEFAULTS.streams,
            show_default=True,
            metavar="N",
            help=TOKEN_STREAMS_HELP,
        ),
        click.option(
            "--max-token-connections",
            type=click.IntRange(min=1),
            default=TOKEN_DEFAULTS.connections,
            show_default=True,
            metavar="N",
            help=TOKEN_CONNECTIONS_HELP,
        ),
        click.option(
            "--admin-reserve",
            type=click.IntRange(min=0),
            default=TOKEN_DEFAULTS.admin_reserve,
            show_default=True,
            metavar="N",
            help=ADMIN_RESERVE_HELP,
        ),
        click.option(
            "--revocation-poll",
            type=click.FloatRange(min=0, min_open=True),
            default=TOKEN_DEFAULTS.revocation_poll_s,
            show_default=True,
            metavar="S",
            help=REVOCATION_HELP,
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def token_limits_of(
    max_token_streams: int, max_token_connections: int, admin_reserve: int, revocation_poll: float
) -> TokenLimits:
    from ..errors import InvalidArgument

    try:
        return TokenLimits(max_token_streams, max_token_connections, admin_reserve, revocation_poll)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def limits_of(header_timeout: float, body_timeout: float, max_connections: int) -> Limits:
    from ..errors import InvalidArgument

    try:
        return Limits(header_timeout_s=header_timeout, body_timeout_s=body_timeout, max_connections=max_connections)
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def click_options(*, token_file_env: str, token_file_option: str = "--token-file") -> Callable[[F], F]:
    """Decorator adding the shared options as ``token_file``, ``allowed_host``, ``allowed_origin``,
    ``header_timeout``, ``body_timeout``, ``max_connections`` and ``fd``. The token file's environment variable is
    read by ``exposure.resolve_token`` (not by click), so an option always beats the environment."""

    def apply(fn: F) -> F:
        options = [
            click.option(
                token_file_option,
                "token_file",
                metavar="PATH",
                type=click.Path(dir_okay=False),
                help=(f"Read the token from the first line of PATH (keeps it out of 'ps'). Env: {token_file_env}."),
            ),
            click.option("--allowed-host", "allowed_host", multiple=True, metavar="NAME", help=HOST_HELP),
            click.option("--allowed-origin", "allowed_origin", multiple=True, metavar="ORIGIN", help=ORIGIN_HELP),
            click.option(
                "--header-timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=DEFAULTS.header_timeout_s,
                show_default=True,
                metavar="S",
                help=HEADER_HELP,
            ),
            click.option(
                "--body-timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=DEFAULTS.body_timeout_s,
                show_default=True,
                metavar="S",
                help=BODY_HELP,
            ),
            click.option(
                "--max-connections",
                type=click.IntRange(min=1),
                default=DEFAULTS.max_connections,
                show_default=True,
                metavar="N",
                help=CONN_HELP,
            ),
            click.option("--fd", "fd", type=click.IntRange(min=0), default=None, metavar="N", help=FD_HELP),
            click.option(
                "--log-format",
                type=click.Choice(["text", "json"]),
                default=None,
                expose_value=False,
                is_eager=True,
                callback=lambda ctx, param, value: _set_log_format(value),
                help=LOG_FORMAT_HELP,
            ),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
KEEPALIVE_S = 15.0


def gateway_options(fn: F) -> F:
    """Every option of the gateway, passed to ``fn`` by name (``sessionwatch.http.options.run`` takes them
    all): one definition for ``sessionwatch serve`` and ``python -m sessionwatch.http``."""
    options = [
        click.option(
            "--host",
            envvar="SESSIONWATCH_HOST",
            default="127.0.0.1",
            show_default=True,
            help="Interface to listen on; anything but loopback needs a token. Env: SESSIONWATCH_HOST.",
        ),
        click.option(
            "--port",
            envvar="SESSIONWATCH_PORT",
            type=click.IntRange(0, 65535),
            default=7878,
            show_default=True,
            help="Env: SESSIONWATCH_PORT.",
        ),
        click.option(
            "--store",
            "store",
            envvar="SESSIONWATCH_STORE",
            metavar="URL",
            help="Store URL (sqlite:///path.db, a path, postgresql://...). Env: SESSIONWATCH_STORE. "
            "Default: the per-user state file.",
        ),
        click.option(
            "--token",
            "token",
            metavar="TOKEN",
            help="The admin bearer token; required beyond loopback (at least 16 characters, no whitespace). "
            "Shows in 'ps': prefer --token-file. Env: SESSIONWATCH_TOKEN.",
        ),
        click_options(token_file_env="SESSIONWATCH_TOKEN_FILE"),
        token_limit_options,
        click.option(
            "--log-level",
            envvar="SESSIONWATCH_LOG_LEVEL",
            type=click.Choice(LOG_LEVELS, case_sensitive=False),
            default="info",
            show_default=True,
            help="warning or above also silences the access log. Env: SESSIONWATCH_LOG_LEVEL.",
        ),
        click.option(
            "--access-log/--no-access-log",
            "access_log",
            envvar="SESSIONWATCH_ACCESS_LOG",
            default=True,
            show_default=True,
            help="One JSON line per request on stderr. Env: SESSIONWATCH_ACCESS_LOG (0 turns it off).",
        ),
        click.option("--no-monitor", is_flag=True, help="Do not run the upstream monitor in this process."),
        click.option(
            "--max-body-bytes",
            type=click.IntRange(min=1),
            default=MAX_BODY_BYTES,
            show_default=True,
            metavar="N",
            help="Request body cap (413 beyond).",
        ),
        click.option(
            "--keepalive",
            type=click.FloatRange(min=0, min_open=True),
            default=KEEPALIVE_S,
            show_default=True,
            metavar="S",
            help="Seconds between SSE keep-alive comments.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn
