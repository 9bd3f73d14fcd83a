"""The command-line options every sessionwatch server shares (Host/Origin allow-lists, limits, token file).

One definition for ``python -m sessionwatch.http``, ``python -m sessionwatch.upstream.node_server`` and
the click commands ``serve``, ``node`` and ``mcp --transport http``, so they cannot drift apart.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .limits import Limits

F = TypeVar("F", bound=Callable[..., Any])
DEFAULTS = Limits()

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
