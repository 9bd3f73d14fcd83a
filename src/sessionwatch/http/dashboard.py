"""``/ui``: the dashboard's page and assets, shipped inside the package (``http/ui/``).

The page and its script and style load without a token: they hold no data. Every data call the page
makes carries the token the user entered (kept in ``sessionStorage``, for the tab only) as an
``Authorization`` header, the log stream included (read with ``fetch`` streaming, not EventSource,
so the token never travels in a URL). A strict Content-Security-Policy keeps the page to its own
origin: no inline script, no outside host, no framing.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import NotFound
from .errors import error_response

PREFIX = "/ui"
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


def is_asset_path(path: str) -> bool:
    """Paths the gateway answers without a token (the page and its files; never data)."""
    return path == PREFIX or path == PREFIX + "/" or (path.startswith(PREFIX + "/") and path[4:] in ASSETS)


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("ui", name).read_bytes()


async def _serve(request: Request) -> Response:
    name = request.path_params.get("name", "index.html")
    if name not in ASSETS:
        return error_response(NotFound(f"no dashboard file {name!r}"))
    body = b"" if request.method == "HEAD" else _asset(name)
    return Response(body, headers={"content-type": ASSETS[name], **SECURITY_HEADERS})


def routes() -> list[Route]:
    return [
        Route(PREFIX, _serve, methods=["GET", "HEAD"]),
        Route(PREFIX + "/", _serve, methods=["GET", "HEAD"]),
        Route(PREFIX + "/{name}", _serve, methods=["GET", "HEAD"]),
    ]
