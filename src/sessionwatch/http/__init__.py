"""The HTTP face of sessionwatch: a Starlette app over the engine, served by uvicorn.

    from sessionwatch.http import create_app, serve
    serve("sqlite:///state.db", port=7878)          # blocking; python -m sessionwatch.http does the same

See docs/http.md for routes, auth, limits, error codes and the SSE format.
"""

from .app import create_app
from .server import serve

__all__ = ["create_app", "serve"]
