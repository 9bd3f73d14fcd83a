"""``serve()``: run the gateway with uvicorn until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import logging
import sys
from typing import Any

import uvicorn

from ..engine import Gateway, default_store_url
from ..errors import InvalidArgument, StoreUnavailable
from ..settings import Settings
from .app import DEFAULT_MAX_BODY, create_app
from .config import settings_from_env
from .exposure import check_exposure, is_loopback, resolve_token  # noqa: F401 - is_loopback re-exported
from .limits import Limits, uvicorn_config
from .origin import RequestPolicy
from .runtime import Runtime

log = logging.getLogger("sessionwatch.http")

GRACEFUL_SHUTDOWN_S = 30  # in-flight requests get this long to finish after SIGTERM/SIGINT


def start_monitor(gw: Gateway) -> None:
    """Start the upstream monitor when this build has one (sessionwatch.upstream)."""
    try:
        start = getattr(gw.upstream, "start", None)
        if callable(start):
            start()
    except Exception as exc:  # noqa: BLE001 - the gateway runs without the monitor
        log.warning("upstream monitor not started: %s: %s", exc.__class__.__name__, exc)


def _configure_logging(level: str, access_log: bool) -> None:
    root = logging.getLogger("sessionwatch")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.propagate = False
    root.setLevel(level.upper())
    access = logging.getLogger("sessionwatch.http.access")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))  # one JSON object per line
        access.addHandler(handler)
        access.propagate = False
    access.setLevel(level.upper() if access_log else logging.CRITICAL + 1)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self.runtime = runtime

    async def shutdown(self, sockets: Any = None) -> None:
        self.runtime.begin_shutdown()  # SSE streams end; in-flight requests finish normally
        await super().shutdown(sockets)


def serve(store_url: str | None = None, *, host: str = "127.0.0.1", port: int = 7878, token: str | None = None,
          log_level: str = "info", monitor: bool = True, access_log: bool = True,
          max_body_bytes: int = DEFAULT_MAX_BODY, keepalive_s: float = 15.0,
          settings: Settings | None = None, token_file: str | None = None,
          allowed_hosts: list[str] | tuple[str, ...] = (), allowed_origins: list[str] | tuple[str, ...] = (),
          limits: Limits | None = None) -> None:
    """Serve the gateway (blocking). Token defaults to ``$SESSIONWATCH_TOKEN`` (or the file named by
    ``token_file`` / ``$SESSIONWATCH_TOKEN_FILE``), the store to ``$SESSIONWATCH_STORE`` or the per-user
    default. Raises Forbidden before binding when ``host`` is not loopback and there is no token or a weak
    one; StoreUnavailable when the store cannot be opened. ``allowed_hosts``/``allowed_origins`` (plus
    ``$SESSIONWATCH_ALLOWED_HOSTS``/``..._ORIGINS``) and ``limits``: see docs/security.md."""
    token = resolve_token(token, token_file, env_token="SESSIONWATCH_TOKEN", env_file="SESSIONWATCH_TOKEN_FILE")
    check_exposure(host, token)
    try:
        policy = RequestPolicy.from_options(allowed_hosts, allowed_origins)
    except ValueError as exc:
        raise InvalidArgument(f"allowed hosts: {exc}") from None
    url = store_url or default_store_url()
    gw_settings = settings_from_env(settings)
    _configure_logging(log_level, access_log)
    server: _Server | None = None
    failure: list[BaseException] = []

    def open_gateway() -> Gateway:
        gw = Gateway.open(url, settings=gw_settings)
        if monitor:
            start_monitor(gw)
        return gw

    def on_open_error(exc: BaseException) -> None:
        failure.append(exc)
        if server is not None:
            server.should_exit = True

    app = create_app(open_gateway, token=token, max_body_bytes=max_body_bytes, keepalive_s=keepalive_s,
                     on_open_error=on_open_error, policy=policy)
    config = uvicorn_config(app, host=host, port=port, limits=limits, log_level=log_level.lower(), access_log=False,
                            lifespan="on", server_header=False, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                            backlog=2048)
    server = _Server(config, app.state.runtime)
    server.run()
    if failure:
        raise StoreUnavailable(f"could not open the store {url!r}: {failure[0]}")
