"""``sessionwatch doctor`` and ``install``: a room's own checks (its installer's ``diagnose``, see
``hosts/installer.py``), then whether the store or gateway its installed command names answers, and whether the
session exists. The engine and the HTTP client load only here, never on the hook's path.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..hosts.base import Room
from ..hosts.checks import Check, Command, ScopeReport


def diagnose(room: Room, scope: str, directory: str | None, *, probe: bool = True) -> ScopeReport:
    """One scope of a room, checked: the room's files and commands, then the store or gateway."""
    found = room.installer().diagnose(scope, directory, probe=probe)
    if found.backend is not None:
        found.report.checks.append(check_backend(*found.backend))
    return found.report


# -- the store or gateway ---------------------------------------------------------------------------------
def check_backend(global_args: list[str], session: str | None, agent: str | None) -> Check:
    """Does the hook's store or gateway answer, and does the session exist (a warning when not yet)?"""
    c = Command([], global_args, None, None)
    gateway = c.option("--gateway") or (None if c.option("--store") else os.environ.get("SESSIONWATCH_GATEWAY"))
    if gateway:
        return _check_gateway(gateway, c.option("--token") or os.environ.get("SESSIONWATCH_TOKEN"), session, agent)
    return _check_store(c.option("--store") or os.environ.get("SESSIONWATCH_STORE"), session, agent)


def _check_gateway(url: str, token: str | None, session: str | None, agent: str | None) -> Check:
    from ..client import GatewayClient
    from ..errors import Forbidden, NotFound, SessionwatchError, Unauthorized

    name = "gateway"
    try:
        with GatewayClient(url, token=token, timeout=2.0) as client:
            health = client.health()
            if session is None:
                return Check(name, True, f"{url} answers ({health.get('status')})")
            try:
                client.get_session(session, agent)
            except NotFound:
                return Check(name, None, f"{url} answers; session {session} does not exist yet (created on first use)")
            return Check(name, True, f"{url} answers; session {session} exists")
    except (Unauthorized, Forbidden) as exc:
        return Check(
            name,
            False,
            f"{url} refuses the token: {exc}",
            "export SESSIONWATCH_TOKEN=<a token for this agent> where the host runs",
        )
    except SessionwatchError as exc:
        return Check(
            name,
            False,
            f"{url} does not answer: {exc}",
            f"start it (sessionwatch serve) or fix the URL given to install ({url})",
        )


def _check_store(url: str | None, session: str | None, agent: str | None) -> Check:
    from ..engine.stores import default_sqlite_path, is_postgres_url, sqlite_path
    from ..errors import NotFound, SessionwatchError

    name = "store"
    if url is None:
        path = default_sqlite_path()
        if not path.exists():
            return Check(name, None, f"no store yet at {path}: the MCP server creates it when the host first starts it")
        url = f"sqlite:///{path}"
    elif not is_postgres_url(url):
        try:
            path = Path(sqlite_path(url))
        except SessionwatchError as exc:
            return Check(name, False, str(exc), "give install a valid --store URL")
        if not path.exists():
            return Check(name, None, f"no store yet at {path}: the MCP server creates it when the host first starts it")
    from ..engine import Gateway  # the engine: only here, never on the hook's path
    from ..settings import settings_from_env

    try:
        backend = Gateway.open(url, timers=False, settings=settings_from_env(), read_only=True, prune_on_open=False)
    except SessionwatchError as exc:
        return Check(name, False, f"cannot open {url}: {exc}", "check the store URL and that the database is up")
    except Exception as exc:  # noqa: BLE001 - a driver's own error: the same finding
        return Check(name, False, f"cannot open {url}: {exc}", "check the store URL and that the database is up")
    try:
        if session is None:
            return Check(name, True, f"{_safe(url)} opens")
        try:
            backend.get_session(session, agent)
        except NotFound:
            return Check(name, None, f"{_safe(url)} opens; session {session} does not exist yet (created on first use)")
        return Check(name, True, f"{_safe(url)} opens; session {session} exists")
    finally:
        backend.close()


def _safe(url: str) -> str:
    """A store URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
