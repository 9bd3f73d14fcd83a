"""``create_app``: the Starlette application of the sessionwatch gateway."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from ..engine import Gateway
from ..serving.limits import MAX_BODY_BYTES, Limits
from ..serving.origin import BrowserGuard, RequestPolicy
from ..serving.tokengate import TokenGate, TokenLimits
from . import (
    dashboard,
    health,
    log_stream,
    openapi,
    routes_hooks,
    routes_log,
    routes_sessions,
    routes_tools,
    routes_ui,
    routes_upstream,
    sse,
)
from .auth import ANY_TOKEN, Authenticator
from .endpoints import Call, Endpoint, make_routes
from .errors import http_exception_handler, internal_error_handler
from .metrics import Metrics, routes as metrics_routes
from .middleware import Guard
from .runtime import GatewayFactory, Runtime

DEFAULT_MAX_BODY = MAX_BODY_BYTES


def _meta_routes(runtime: Runtime, doc: Callable[[], dict[str, Any]]) -> list[Endpoint]:
    def openapi_doc(c: Call) -> Any:
        return doc()

    return [
        *health.routes(runtime),
        Endpoint(
            "GET",
            "/v1/openapi.json",
            "openapi",
            "This OpenAPI 3.1 document.",
            openapi_doc,
            tag="meta",
            needs_gateway=False,
            result={"type": "object"},
            touches=ANY_TOKEN,
        ),
    ]


def create_app(
    gateway_factory_or_gateway: Gateway | GatewayFactory,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    keepalive_s: float = 15.0,
    on_open_error: Callable[[BaseException], None] | None = None,
    policy: RequestPolicy | None = None,
    token_limits: TokenLimits | None = None,
    connections: int | None = None,
) -> Starlette:
    """The gateway app. Given a factory, the app opens the Gateway on a worker thread at startup (health
    answers 503 until it is open) and closes it at shutdown; given a Gateway, it borrows it (you close it).

    ``token`` (when set) is the admin token, and a token is then required as ``Authorization: Bearer
    <token>`` on every route but health: the admin token, or a live token of the store's token table
    (admin or scoped to agents; see http/auth.py). Without ``token`` the gateway is tokenless.
    ``policy`` says which Host names and Origins are accepted (default: loopback names, no Origin; see
    serving/origin.py). ``token_limits`` bound what one stored token may hold open, out of ``connections``
    (the server's connection cap), and say how often revocations are looked for (serving/tokengate.py).
    ``app.state.runtime.begin_shutdown()`` ends the SSE streams (``serve`` calls it on SIGTERM/SIGINT).
    """
    runtime = Runtime(gateway_factory_or_gateway, keepalive_s=keepalive_s, on_open_error=on_open_error)
    metrics = runtime.metrics = Metrics(runtime)  # this app's own registry (GET /metrics)
    if runtime.gateway is not None:
        metrics.attach(runtime.gateway)
    cached: dict[str, Any] = {}

    def doc() -> dict[str, Any]:
        if "doc" not in cached:
            cached["doc"] = openapi.build(endpoints, token_required=token is not None)
        return cached["doc"]

    endpoints: list[Endpoint] = [
        *_meta_routes(runtime, doc),
        *routes_tools.ROUTES,
        *sse.ROUTES,
        *routes_sessions.ROUTES,
        *routes_hooks.ROUTES,
        *routes_log.ROUTES,
        *routes_upstream.ROUTES,
        *log_stream.ROUTES,
        *routes_ui.ROUTES,
        *metrics_routes(metrics),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    auth = Authenticator(token, runtime.token_table)
    cap = connections if connections is not None else Limits().max_connections
    gate = TokenGate(token_limits, cap, auth.live) if token else None  # tokenless: no stored tokens
    app = Starlette(
        routes=[*make_routes(endpoints, runtime, max_body_bytes), *dashboard.routes()],
        middleware=[
            Middleware(Guard, auth=auth, max_body_bytes=max_body_bytes, gate=gate),
            Middleware(BrowserGuard, policy=policy),
        ],  # inside Guard: refusals reach the access log
        exception_handlers={HTTPException: http_exception_handler, Exception: internal_error_handler},
        lifespan=lifespan,
    )
    # No trailing-slash redirect: its Location would echo the client's Host header and the routing
    # stand-in of an encoded '/'. '/v1/sessions/k/' is a plain 404 JSON error like any unknown path.
    app.router.redirect_slashes = False
    app.state.runtime = runtime
    app.state.endpoints = endpoints
    app.state.gate = gate
    return app
