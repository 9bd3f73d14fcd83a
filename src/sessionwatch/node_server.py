"""``sessionwatch node``: serve this machine's Claude Code and Codex transcripts to a gateway, read-only.

Routes (bearer token on all but health):

* ``GET /v1/node/health``
* ``GET /v1/node/threads?catalog=claude|codex`` -> ``{"threads": [...]}`` (both catalogs if omitted)
* ``GET /v1/node/threads/{catalog}/{threadId}/items?before=<itemId>&limit=<n>`` -> ``{"items", "nextBefore"}``
  newest first, at most 200 per page. An unknown thread is a definitive
  ``404 {"error": {"code": "thread_not_found"}}``; a malformed thread id, item id or limit is a 400.

No path leaves the transcript roots: thread ids are checked against a strict pattern and every file
must resolve (symlinks followed) inside its catalog folder; a thread is served only if the listing shows
it (``hosts/claude_code/transcripts.thread_of`` decides both). Host, Origin and Content-Type are checked like on the
gateway (``serving/origin.py``), and the same connection limits apply (``serving/limits.py``). Run it with
``python -m sessionwatch.node_server --port P --token-file F [--claude-root DIR] [--codex-root DIR]`` (a flag per
served room: its ``Place``).
"""

from __future__ import annotations

import argparse
import hmac
import logging
import sys
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .engine.node import CATALOG_IDS, LocalCatalog, check_before, check_limit, check_thread_id, items_page
from .errors import InvalidArgument, NotFound, SessionwatchError
from .hosts.base import Place
from .hosts.registry import of_catalog
from .serving.exposure import check_exposure, resolve_token
from .serving.limits import Limits, uvicorn_config
from .serving.options import add_argparse_options, limits_of
from .serving.origin import BrowserGuard, RequestPolicy

log = logging.getLogger("sessionwatch.node")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def served_places() -> dict[str, Place]:
    """Catalog id -> the place of its room, for every catalog a node serves (each room whose host writes
    JSONL transcripts): a node's --claude-root, --codex-root, ..."""
    out: dict[str, Place] = {}
    for catalog in CATALOG_IDS:
        room = of_catalog(catalog)
        if room is not None and room.place is not None:
            out[catalog] = room.place
    return out


def create_node_app(token: str, *, policy: RequestPolicy | None = None, **roots: str | None) -> Starlette:
    """The node's app. ``roots``: where a served room's transcripts are, by its place (``claude_root=...``)."""
    if not isinstance(token, str) or not token.strip():
        raise InvalidArgument("a node needs a non-empty token")
    places = served_places()
    unknown = sorted(set(roots) - {p.option for p in places.values()})
    if unknown:
        raise TypeError(f"create_node_app() got unexpected keyword arguments: {', '.join(unknown)}")
    # every room whose host writes transcripts, at its default place unless given one
    catalogs = {c: LocalCatalog(c, roots.get(places[c].option) if c in places else None) for c in CATALOG_IDS}
    expected = f"Bearer {token}".encode()

    def authorized(request: Request) -> bool:
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    def catalog_of(value: str | None) -> LocalCatalog:
        if value not in catalogs:
            raise InvalidArgument(f"catalog must be one of {', '.join(CATALOG_IDS)}, got {value!r}")
        return catalogs[value]

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "catalogs": list(CATALOG_IDS)})

    async def threads(request: Request) -> JSONResponse:
        if not authorized(request):
            return _error(401, "unauthorized", "missing or wrong bearer token")
        name = request.query_params.get("catalog")
        chosen = [catalog_of(name)] if name is not None else list(catalogs.values())

        def listing() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for cat in chosen:
                out.extend(cat.list_threads(include_paths=False))
            return sorted(out, key=lambda t: -t["updatedAt"])

        try:
            return JSONResponse({"threads": await run_in_threadpool(listing)})
        except OSError as exc:
            return _error(503, "unavailable", f"cannot list transcripts: {exc.strerror or exc}")

    async def items(request: Request) -> JSONResponse:
        if not authorized(request):
            return _error(401, "unauthorized", "missing or wrong bearer token")
        cat = catalog_of(request.path_params["catalog"])
        thread_id = check_thread_id(request.path_params["thread_id"])
        before = check_before(request.query_params.get("before"))
        limit = check_limit(request.query_params.get("limit"))

        def page() -> dict[str, Any] | None:
            found = cat.locate(thread_id)
            if found is None:
                return None
            return items_page(found.path, cat.rules, before, limit)

        try:
            result = await run_in_threadpool(page)
        except OSError as exc:
            return _error(503, "unavailable", f"cannot read the transcript: {exc.strerror or exc}")
        if result is None:
            return _error(404, "thread_not_found", f"no {cat.catalog_id} thread {thread_id!r} on this node")
        return JSONResponse(result)

    async def sw_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SessionwatchError)
        status = 404 if isinstance(exc, NotFound) else exc.http_status
        return _error(status, exc.code, exc.message)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_argument")
        return _error(exc.status_code, code, str(exc.detail))

    routes = [
        Route("/v1/node/health", health, methods=["GET"]),
        Route("/v1/node/threads", threads, methods=["GET"]),
        Route("/v1/node/threads/{catalog}/{thread_id}/items", items, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={SessionwatchError: sw_error, HTTPException: http_error},
        middleware=[Middleware(BrowserGuard, policy=policy)],
    )


TOKEN_SOURCES = "--token, --token-file, SESSIONWATCH_NODE_TOKEN or SESSIONWATCH_NODE_TOKEN_FILE"


def node_token(token: str | None, token_file: str | None) -> str:
    """The node's token from an option or the environment; InvalidArgument when there is none."""
    found = resolve_token(
        token, token_file, env_token="SESSIONWATCH_NODE_TOKEN", env_file="SESSIONWATCH_NODE_TOKEN_FILE"
    )
    if not found:
        raise InvalidArgument(f"a node needs a token ({TOKEN_SOURCES})")
    return found


def serve_node(
    host: str,
    port: int,
    token: str,
    *,
    allowed_hosts: list[str] | tuple[str, ...] = (),
    allowed_origins: list[str] | tuple[str, ...] = (),
    limits: Limits | None = None,
    fd: int | None = None,
    **roots: str | None,
) -> None:
    """Serve until interrupted (blocking). Raises Forbidden before binding for a weak token beyond loopback.
    ``fd``: serve on that inherited listening socket instead of binding ``host``/``port``; ``roots``: as for
    :func:`create_node_app`."""
    import uvicorn

    from .serving.exposure import adopt_socket

    sockets: list[Any] | None = None
    if fd is not None:
        sock, host = adopt_socket(fd, host)
        sockets = [sock]
    check_exposure(host, token, what="a node", option=TOKEN_SOURCES)
    try:
        policy = RequestPolicy.from_options(allowed_hosts, allowed_origins)
    except ValueError as exc:
        raise InvalidArgument(f"allowed hosts: {exc}") from None
    app = create_node_app(token, policy=policy, **roots)
    uvicorn.Server(uvicorn_config(app, host=host, port=port, limits=limits, log_level="warning")).run(sockets=sockets)


def main(argv: list[str] | None = None) -> int:
    places = served_places()
    labels = " and ".join(r.label for r in (of_catalog(c) for c in CATALOG_IDS) if r is not None)
    parser = argparse.ArgumentParser(
        prog="python -m sessionwatch.node_server",
        description=f"Serve this machine's {labels} transcripts to a sessionwatch gateway (read-only, bearer token).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--token",
        default=None,
        help="bearer token (default: $SESSIONWATCH_NODE_TOKEN); prefer --token-file, since --token shows in 'ps'",
    )
    for place in places.values():
        parser.add_argument(place.flag, dest=place.option, default=None, help=place.help)
    add_argparse_options(parser, token_file_env="SESSIONWATCH_NODE_TOKEN_FILE")
    args = parser.parse_args(argv)
    try:
        serve_node(
            args.host,
            args.port,
            node_token(args.token, args.token_file),
            allowed_hosts=args.allowed_host,
            allowed_origins=args.allowed_origin,
            limits=limits_of(args.header_timeout, args.body_timeout, args.max_connections),
            fd=args.fd,
            **{p.option: getattr(args, p.option) for p in places.values()},
        )
    except SessionwatchError as exc:
        print(f"sessionwatch node: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
