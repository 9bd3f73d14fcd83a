"""Bearer tokens to principals, and what each route may touch.

``Authenticator`` turns an ``Authorization: Bearer`` header into a :class:`~sessionwatch.access.Principal`:
the gateway's own ``--token`` is the admin token; any other token must be a live row of the store's
token table (see ``sessionwatch.tokens``). Rows are cached for at most ``TOKEN_CACHE_S`` seconds, so a
revocation written by any process (another gateway of the same PostgreSQL database, the CLI) is obeyed
everywhere within that time.

Every endpoint declares what it touches (:class:`Touches`); :func:`authorize` is the one place that
checks a principal against that declaration, before the handler runs. A route that declares nothing is
admin-only unless it lives under ``/v1/sessions/{key}``, where the key names the session touched: so a
new route is covered by construction.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread

from ..access import ADMIN, Principal
from ..engine.stores import TokenRow
from ..errors import Forbidden, SessionwatchError, StoreUnavailable, Unauthorized
from ..keys import agent_of
from ..repeats import RepeatedFailures
from ..tokens import token_id_of, verify

log = logging.getLogger("sessionwatch.http.auth")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

TOKEN_CACHE_S = 0.5  # a revoked token is refused by every gateway at most this long after the revoke
_CACHE_MAX = 4096
SESSION_PREFIX = "/v1/sessions/{key}"
PRINCIPAL = "sessionwatch.principal"  # the ASGI scope key the resolved principal travels in


class TokenTable(Protocol):
    """Where stored tokens are looked up: the open engine (``Gateway.token``)."""

    def token(self, token_id: str) -> TokenRow | None: ...


class Authenticator:
    """Resolve bearer headers. ``admin_token`` None: the gateway is tokenless and every request is admin."""

    def __init__(
        self, admin_token: str | None, tokens: Callable[[], TokenTable | None], *, ttl_s: float = TOKEN_CACHE_S
    ) -> None:
        self.admin = admin_token.encode() if admin_token else None
        self._tokens = tokens
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, TokenRow | None]] = {}

    @property
    def enabled(self) -> bool:
        return self.admin is not None

    async def resolve(self, header: bytes | None) -> Principal:
        """The principal, or raise Unauthorized (no/wrong/revoked token) or StoreUnavailable."""
        if self.admin is None:
            return ADMIN  # tokenless (loopback only): whoever can connect is trusted, as before tokens existed
        scheme, _, given = (header or b"").partition(b" ")
        given = given.strip()
        if scheme.lower() != b"bearer" or not given:
            raise Unauthorized("a valid 'Authorization: Bearer <token>' header is required")
        if hmac.compare_digest(given, self.admin):
            return ADMIN
        text = given.decode("latin-1")
        token_id = token_id_of(text)
        if token_id is None:
            raise Unauthorized("a valid 'Authorization: Bearer <token>' header is required")
        principal = verify(await self._row(token_id), text)
        if principal is None:
            raise Unauthorized("the bearer token is unknown or revoked")
        return principal

    def live(self, token_id: str) -> bool | None:
        """Is the stored token still live? (blocking; None while the store is not open). The token gate
        asks this for the tokens behind open requests and streams, to end those of a revoked one."""
        table = self._tokens()
        if table is None:
            return None
        row = table.token(token_id)
        return row is not None and row.revoked_at is None

    async def _row(self, token_id: str) -> TokenRow | None:
        now = time.monotonic()
        hit = self._cache.get(token_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        table = self._tokens()
        if table is None:
            raise StoreUnavailable("the gateway is starting (its token table is not open yet); retry shortly")
        try:
            row = await anyio.to_thread.run_sync(table.token, token_id)
        except SessionwatchError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed read refuses the request; it never lets it through
            failure_log.warning("reading token %s failed: %s", token_id, exc)
            raise StoreUnavailable(f"checking the bearer token failed: {exc.__class__.__name__}") from None
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[token_id] = (now + self.ttl_s, row)
        return row


@dataclass(frozen=True)
class Touches:
    """What a route touches, for the access check.

    ``kind``: ``admin`` (admin tokens only), ``any`` (any valid token), ``view`` (any valid token; the
    handler narrows what it returns to ``principal.agent_filter()``), ``tool`` (the tool layer checks
    the caller and every target against the token's agents), or ``sessions`` (every session named at
    ``keys`` must be of the token's agents; ``agentId`` from the query or body names a bare ``global``).
    ``keys`` entries read ``path:<param>``, ``query:<param>`` or ``body:<field>``.
    """

    kind: str
    keys: tuple[str, ...] = ()


ADMIN_ONLY = Touches("admin")
ANY_TOKEN = Touches("any")
OWN_VIEW = Touches("view")
TOOL = Touches("tool")
# A session route touches its {key}; a body may also name a spawn parent (whose queue then gets the child's
# notices) or the source session a turn claims to come from: those must be the token's agents' too.
SESSION_IN_PATH = Touches("sessions", ("path:key", "body:spawnedBy", "body:sourceSessionKey"))


def sessions(*keys: str) -> Touches:
    return Touches("sessions", keys)


def declared(touches: Touches | None, path: str) -> Touches:
    """A route's declaration, or the safe default: its session key under /v1/sessions/{key}, else admin."""
    if touches is not None:
        return touches
    return SESSION_IN_PATH if path.startswith(SESSION_PREFIX) else ADMIN_ONLY


def authorize(
    principal: Principal,
    touches: Touches,
    what: str,
    path: dict[str, Any],
    query: dict[str, Any],
    body: dict[str, Any] | None,
) -> None:
    """Raise Forbidden unless ``principal`` may call a route declaring ``touches``.

    Called twice per request: with ``body`` None before the body is read (a token refused by the path
    or query alone learns nothing from body validation), then with the validated body."""
    if principal.admin or touches.kind in ("any", "view", "tool"):
        return
    if touches.kind == "admin":
        principal.require_admin(what)
        return
    if touches.kind != "sessions":
        raise Forbidden(f"{what}: unknown access declaration {touches.kind!r}")
    sources = {"path": path, "query": query, "body": body or {}}
    agent = query.get("agentId", (body or {}).get("agentId"))
    for where in touches.keys:
        src, _, name = where.partition(":")
        if body is None and src == "body":
            continue
        value = sources[src].get(name)
        if value is None:
            continue  # an optional key left out (validation has already refused a missing required one)
        if not isinstance(value, str):
            raise Forbidden(f"{what}: {name} must name a session of this token's agents")
        if body is None and agent_of(value) is None and not isinstance(agent, str):
            continue  # a bare 'global' key whose agentId may be in the body: decided in the second call
        principal.require_key(value, agent if isinstance(agent, str) else None)


NOBODY = Principal(admin=False)  # what a request the Guard did not resolve may do: only "any" routes


def principal_of(scope: Mapping[str, Any]) -> Principal:
    """The principal the Guard resolved for this request (fail-safe: nobody, when none was resolved)."""
    return scope.get(PRINCIPAL, NOBODY)
