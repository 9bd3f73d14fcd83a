"""Declarative endpoints: one table entry per route drives routing, validation and the OpenAPI document."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..access import Principal
from ..engine import Gateway
from ..errors import InvalidArgument, SessionwatchError, StoreUnavailable
from ..repeats import RepeatedFailures
from .auth import Touches, authorize, declared, principal_of
from .delivery import wait_for_drains
from .errors import error_response
from .jsonio import json_response, read_object
from .paths import SLASH_STAND_IN
from .runtime import Runtime
from .schemas import Schema
from .validate import check, query_value

log = logging.getLogger("sessionwatch.http")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


@dataclass
class Call:
    """What a handler gets: validated path, query and body, and the engine."""

    request: Request
    runtime: Runtime
    gw: Gateway
    path: dict[str, str]
    query: dict[str, Any]
    body: dict[str, Any]
    principal: Principal  # who is calling: an admin, or a token scoped to agents (see auth.py)


Handler = Callable[[Call], Any]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # OpenAPI template, e.g. /v1/sessions/{key}/inbound
    op_id: str
    summary: str
    handler: Handler
    tag: str = "sessions"
    body: Schema | None = None  # request body schema (None: no body read)
    query: dict[str, Schema] = field(default_factory=dict)
    result: Schema | None = None  # 200 result schema (None: documented by hand in openapi.py)
    thread: bool = False  # the handler may block (network, big scans): run it on a worker thread
    needs_gateway: bool = True
    required_query: tuple[str, ...] = ()
    description: str = ""
    touches: Touches | None = None  # what the route touches, for the access check (None: see auth.declared)


def path_params(request: Request) -> dict[str, str]:
    return {k: v.replace(SLASH_STAND_IN, "/") if isinstance(v, str) else v for k, v in request.path_params.items()}


def parse_query(request: Request, spec: dict[str, Schema], required: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not spec:
        return out
    params = request.query_params
    for name, schema in spec.items():
        raw = params.get(name)
        if raw is None:
            continue
        out[name] = query_value(raw, schema, name)
    for name in required:
        if name not in out:
            raise InvalidArgument(f"query parameter {name} is required")
    return out


def failure_response(exc: BaseException, what: str) -> Response:
    """Engine errors keep their code; anything else is a store/backend failure (503), logged."""
    if isinstance(exc, SessionwatchError):
        return error_response(exc)
    if isinstance(exc, (ImportError, AttributeError, NotImplementedError)):
        failure_log.warning("%s is not available: %s", what, exc, per=what)
        return error_response(StoreUnavailable(f"{what} is not available in this gateway: {exc}"))
    failure_log.exception("%s failed", what, per=what)
    return error_response(StoreUnavailable(f"{what} failed: {exc.__class__.__name__}: {exc}"))


RequestHandler = Callable[[Request], Awaitable[Response]]


def make_handler(ep: Endpoint, runtime: Runtime, max_body: int) -> RequestHandler:
    is_async = inspect.iscoroutinefunction(ep.handler)
    touches = declared(ep.touches, ep.path)

    async def endpoint(request: Request) -> Response:
        await wait_for_drains()  # a drain answered before this request came is acknowledged (delivery.py)
        try:
            gw = runtime.require() if ep.needs_gateway else runtime.gateway
            query = parse_query(request, ep.query, ep.required_query)
            principal = principal_of(request.scope)
            path = path_params(request)
            authorize(principal, touches, ep.op_id, path, query, None)
            body: dict[str, Any] = {}
            if ep.body is not None:
                body = await read_object(request, max_body)
                check(body, ep.body, "request body")
            authorize(principal, touches, ep.op_id, path, query, body)
            call = Call(request, runtime, gw, path, query, body, principal)
            if is_async:
                result = await ep.handler(call)
            else:  # store I/O never runs on the event loop (see Runtime.store_limiter)
                limiter = runtime.slow_limiter if ep.thread else runtime.store_limiter
                result = await anyio.to_thread.run_sync(ep.handler, call, limiter=limiter)
        except Exception as exc:  # noqa: BLE001 - mapped to a JSON error, never a bare 500
            return failure_response(exc, ep.op_id)
        if callable(result):  # a Response or another ASGI app (the SSE stream)
            return result
        return json_response(result)

    endpoint.__name__ = ep.op_id
    return endpoint


def make_routes(endpoints: list[Endpoint], runtime: Runtime, max_body: int) -> list[Route]:
    """One Route per path (so a 405 lists every allowed method in ``Allow``), in table order."""
    by_path: dict[str, dict[str, RequestHandler]] = {}
    for ep in endpoints:
        by_path.setdefault(ep.path, {})[ep.method] = make_handler(ep, runtime, max_body)
    routes: list[Route] = []
    for path, handlers in by_path.items():
        if len(handlers) == 1:
            ((method, handler),) = handlers.items()
            routes.append(Route(path, handler, methods=[method], name=handler.__name__))
            continue

        async def dispatch(request: Request, handlers: dict[str, RequestHandler] = handlers) -> Response:
            return await handlers["GET" if request.method == "HEAD" else request.method](request)

        routes.append(Route(path, dispatch, methods=list(handlers), name=path))
    return routes
