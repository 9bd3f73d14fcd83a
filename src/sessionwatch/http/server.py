"""``serve()``: run the gateway with uvicorn until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import logging
import socket
import sys
import time
from typing import Any

import uvicorn

from ..engine import Gateway, default_store_url
from ..engine.stores import Store, open_store
from ..errors import InvalidArgument, SessionwatchError, StoreUnavailable, StoreUnreachable
from ..logformat import formatter
from ..repeats import flush_all
from ..serving.exposure import adopt_socket, check_exposure, is_loopback, resolve_token  # noqa: F401 - is_loopback re-exported
from ..serving.limits import Limits, descriptor_budget, uvicorn_config
from ..serving.origin import RequestPolicy
from ..serving.tokengate import TokenLimits
from ..settings import Settings
from .app import DEFAULT_MAX_BODY, create_app
from .config import settings_from_env
from .runtime import Runtime, redact_url, store_path

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
        handler.setFormatter(formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.propagate = False
    root.setLevel(level.upper())
    access = logging.getLogger("sessionwatch.http.access")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter("%(message)s"))  # one JSON object per line
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
        # Now, not at exit: uvicorn ends the process by raising the signal again, and no exit hook runs.
        flush_all()  # the repeats of a failure not yet reported get their count


class ListenFailed(SessionwatchError):
    """The gateway could not listen on its address (port in use, address not on this machine)."""

    code = "unavailable"
    http_status = 503


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Bind every address ``host`` resolves to (as uvicorn would), before the server starts, so a busy
    port is one clear error instead of a server that logged its startup and then died."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound: list[socket.socket] = []
    seen: set[tuple[Any, ...]] = set()
    try:
        for family, kind, proto, _name, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(bound) > 1:  # port 0: every address gets the port the first one was given
                addr = (addr[0], bound[0].getsockname()[1], *addr[2:])
            sock.bind(addr)
    except OSError as exc:
        for sock in bound:
            sock.close()
        raise ListenFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return bound


class StoppedWaiting(StoreUnavailable):
    """Shut down before the database ever answered: an ordinary end, not a failure to report."""


STORE_RETRY_S = (0.5, 5.0)  # first and longest wait between attempts to open an unreachable store


def wait_for_store(url: str, runtime: Runtime) -> Store:
    """Open the store, retrying while its database is unreachable (readiness says why meanwhile); gives
    up when the gateway shuts down, or when the database answers with an error a wait cannot cure."""
    delay = STORE_RETRY_S[0]
    while True:
        try:
            store = open_store(url)
        except StoreUnreachable as exc:
            runtime.message = f"waiting for the database: {exc.message}"
        else:
            log.info("the database answered; store %s open", store_path(store))
            return store
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if runtime.state == "stopping":
                raise StoppedWaiting("the gateway stopped while waiting for its database")
            time.sleep(0.1)
        delay = min(delay * 2, STORE_RETRY_S[1])


def serve(
    store_url: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 7878,
    token: str | None = None,
    log_level: str = "info",
    monitor: bool = True,
    access_log: bool = True,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    keepalive_s: float = 15.0,
    settings: Settings | None = None,
    token_file: str | None = None,
    allowed_hosts: list[str] | tuple[str, ...] = (),
    allowed_origins: list[str] | tuple[str, ...] = (),
    limits: Limits | None = None,
    token_limits: TokenLimits | None = None,
    fd: int | None = None,
) -> None:
    """Serve the gateway (blocking). Token defaults to ``$SESSIONWATCH_TOKEN`` (or the file named by
    ``token_file`` / ``$SESSIONWATCH_TOKEN_FILE``), the store to ``$SESSIONWATCH_STORE`` or the per-user
    default. ``allowed_hosts``/``allowed_origins`` (plus ``$SESSIONWATCH_ALLOWED_HOSTS``/``..._ORIGINS``)
    and ``limits``: see docs/security.md; ``token_limits``: what one stored token may hold open, and how
    often revocations are looked for (docs/http.md). ``fd``: serve on that inherited listening socket
    instead of binding ``host``/``port``.

    Before anything is bound or logged: Forbidden when ``host`` is not loopback and there is no token or a
    weak one; InvalidArgument for a store URL that can only be a mistake; StoreUnavailable when the store
    cannot be opened; ListenFailed when the address is in use. The restart sweep then runs while the server
    already answers (health says 503 "starting" until it has finished)."""
    token = resolve_token(token, token_file, env_token="SESSIONWATCH_TOKEN", env_file="SESSIONWATCH_TOKEN_FILE")
    inherited: list[socket.socket] = []
    if fd is not None:
        sock, host = adopt_socket(fd, host)
        inherited.append(sock)
    check_exposure(host, token)
    try:
        policy = RequestPolicy.from_options(allowed_hosts, allowed_origins)
    except ValueError as exc:
        raise InvalidArgument(f"allowed hosts: {exc}") from None
    url = store_url or default_store_url()
    gw_settings = settings_from_env(settings)
    _configure_logging(log_level, access_log)
    sockets = inherited or bind_sockets(host, port)  # bound, not yet accepting: a busy port creates no store file
    store: Store | None = None
    try:
        store = open_store(url)  # raises here, once, with its own message; nothing was logged yet
    except StoreUnreachable as exc:
        # A database that is down (or still starting) is no reason to exit: serve, answer readiness 503
        # and liveness 200, and open the store once the database answers, so restarting the database never
        # means restarting every gateway. A URL or a configuration that is wrong still fails at once.
        log.warning("%s; serving anyway, ready once the database answers", exc.message)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if store is not None and getattr(store, "created", False):
        log.info("created a new store at %s", store_path(store))
    server: _Server | None = None
    failure: list[BaseException] = []

    def open_gateway() -> Gateway:
        nonlocal store
        if store is None:
            store = wait_for_store(url, app.state.runtime)
        gw = Gateway(store, settings=gw_settings)  # runs the restart sweep
        if monitor:
            start_monitor(gw)
        return gw

    def on_open_error(exc: BaseException) -> None:
        if isinstance(exc, StoppedWaiting):
            return
        failure.append(exc)
        if server is not None:
            server.should_exit = True

    limits = limits or Limits()
    cap = descriptor_budget(limits.max_connections)
    app = create_app(
        open_gateway,
        token=token,
        max_body_bytes=max_body_bytes,
        keepalive_s=keepalive_s,
        on_open_error=on_open_error,
        policy=policy,
        token_limits=token_limits,
        connections=cap,
    )
    config = uvicorn_config(
        app,
        host=host,
        port=sockets[0].getsockname()[1],
        limits=limits,
        cap=cap,
        log_level=log_level.lower(),
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        backlog=2048,
    )
    server = _Server(config, app.state.runtime)
    shown = f"[{host}]" if ":" in host else host
    log.info("listening on http://%s:%d", shown, config.port)
    log.info("dashboard: http://%s:%d/ui/", "127.0.0.1" if host in ("0.0.0.0", "::") else shown, config.port)
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    if failure:
        if store is not None:
            store.close()
        failed = failure[0]
        if isinstance(failed, SessionwatchError):
            raise failed  # already says what failed; wrapping it again would say it twice
        raise StoreUnavailable(f"the restart sweep on {redact_url(url)} failed: {failed.__class__.__name__}: {failed}")
