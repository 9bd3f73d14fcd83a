"""What a server needs before it binds: is the address loopback, is the token good enough, where is it.

Shared by ``serve``, ``sessionwatch node`` and ``sessionwatch mcp --transport http`` (each also takes
``--fd N``, an inherited listening socket, whose address then counts as the host). A token given with
``--token`` shows in ``ps`` to every local user, so each also takes ``--token-file`` (and an environment
variable naming the file).
"""

from __future__ import annotations

import ipaddress
import os
import socket

from ..errors import Forbidden, InvalidArgument

MIN_TOKEN_CHARS = 16  # beyond loopback; ``sessionwatch token`` prints 43


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; wildcard and other addresses are not loopback."""
    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_problem(token: str) -> str | None:
    if any(ch.isspace() for ch in token):
        return "the token contains whitespace"
    if len(token) < MIN_TOKEN_CHARS:
        return f"the token is {len(token)} characters long; at least {MIN_TOKEN_CHARS} are required"
    return None


def check_exposure(
    host: str, token: str | None, *, what: str = "the gateway", option: str = "--token or SESSIONWATCH_TOKEN"
) -> None:
    """Refuse (Forbidden) to listen beyond loopback without a token, or with a weak one."""
    if is_loopback(host):
        if token is not None and any(ch.isspace() for ch in token):
            raise Forbidden("refusing a token that contains whitespace: it cannot be sent in a header reliably")
        return
    if not token:
        raise Forbidden(
            f"refusing to listen on {host!r} without a token: beyond loopback {what} requires "
            f"a bearer token (pass {option})"
        )
    problem = token_problem(token)
    if problem is not None:
        raise Forbidden(
            f"refusing to listen on {host!r} with a weak token: {problem}. 'sessionwatch token' prints a strong one"
        )


def read_token_file(path: str) -> str:
    """The first line of ``path`` without surrounding whitespace; InvalidArgument when unreadable or empty."""
    try:
        with open(path, encoding="utf-8") as fh:
            line = fh.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read the token file {path!r}: {getattr(exc, 'strerror', None) or exc}") from None
    token = line.strip()
    if not token:
        raise InvalidArgument(f"the token file {path!r} is empty")
    return token


def resolve_token(
    token: str | None, token_file: str | None, *, env_token: str | None = None, env_file: str | None = None
) -> str | None:
    """The token from ``--token``, ``--token-file``, then the two environment variables (in that order).

    Giving both a token and a token file is an error, so one never silently wins.
    """
    if token and token_file:
        raise InvalidArgument("give a token or a token file, not both")
    if token:
        return token
    if token_file:
        return read_token_file(token_file)
    env = os.environ
    from_env = env.get(env_token) if env_token else None
    file_env = env.get(env_file) if env_file else None
    if from_env and file_env:
        raise InvalidArgument(f"${env_token} and ${env_file} are both set; set one, not both")
    if from_env:
        return from_env
    if file_env:
        return read_token_file(file_env)
    return None


def adopt_socket(fd: int, host: str) -> tuple[socket.socket, str]:
    """The listening socket inherited as descriptor ``fd`` (``--fd``: systemd socket activation, tests), and
    the address it is bound to, which then stands for ``host`` in the exposure check: a socket on 0.0.0.0
    needs a token however it was opened. ``socket.socket(fileno=...)`` reads the real family, so uvicorn and
    the Host check see the real address (uvicorn's own ``fd`` option would label it AF_UNIX)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise InvalidArgument(f"--fd {fd}: not an open socket ({exc.strerror or exc})") from None
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        host = str(sock.getsockname()[0])
    return sock, host
