"""Running the gateway from its options (``serving.options.gateway_options``): ``sessionwatch serve`` and
``python -m sessionwatch.http`` both end here, with the same options, defaults and environment variables
(docs/http.md lists them), so one cannot lack what the other has."""

from __future__ import annotations

from ..serving.options import limits_of, token_limits_of


def run(
    *,
    store: str | None,
    host: str,
    port: int,
    token: str | None,
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
    log_level: str,
    access_log: bool,
    no_monitor: bool,
    max_body_bytes: int,
    keepalive: float,
) -> None:
    """Serve the gateway with the options above (blocking)."""
    from .server import serve

    serve(
        store,
        host=host,
        port=port,
        token=token,
        log_level=log_level.lower(),
        monitor=not no_monitor,
        access_log=access_log,
        max_body_bytes=max_body_bytes,
        keepalive_s=keepalive,
        token_file=token_file,
        allowed_hosts=allowed_host,
        allowed_origins=allowed_origin,
        limits=limits_of(header_timeout, body_timeout, max_connections),
        token_limits=token_limits_of(max_token_streams, max_token_connections, admin_reserve, revocation_poll),
        fd=fd,
    )
