"""Keep web pages out: a pure-ASGI layer that checks Host, Origin and Content-Type before any route runs.

A page in the user's browser can send requests to a server on loopback: a ``text/plain`` POST needs no
CORS preflight, and DNS rebinding lets a page on the attacker's name read the answers. Three rules close
that, shared by the REST gateway, ``sessionwatch node`` and the MCP HTTP transport (docs/security.md):

* ``Host`` must name this server: a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``) or the
  address the connection arrived on, with this server's port; or a name configured with ``--allowed-host``.
  A rebinding page always sends its own name, so it gets 421.
* A request that carries an ``Origin`` (every cross-origin fetch and every browser POST does) must name a
  configured origin, or this server itself (same scheme, name and port as the Host just accepted: the
  dashboard at /ui calling its own gateway); no other origin is allowed by default (403). A browser's
  no-cors GET has no ``Origin`` but is marked ``Sec-Fetch-Site: cross-site``/``same-site``; it is refused
  the same way.
* A request with a body must declare ``Content-Type: application/json`` (415), which a page can only send
  after a preflight this server never grants. Media types are case-insensitive (``APPLICATION/JSON`` is
  JSON); the header is handed on in lower case, so a route that compares it exactly agrees.

It also refuses (400) a request with more than one ``Authorization`` header: which copy counts differs
between servers, so one request could be checked as one caller and served as another.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InvalidArgument
from .tokengate import authorization_of
from .wire import JSON_TYPE, dumps

ENV_HOSTS = "SESSIONWATCH_ALLOWED_HOSTS"
ENV_ORIGINS = "SESSIONWATCH_ALLOWED_ORIGINS"
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
CROSS_SITE = frozenset({b"cross-site", b"same-site"})  # "same-origin" and "none" (typed URL) are fine


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` -> (lower-case name without brackets, port or None); None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, _, port_text = value.partition(":")
        if ":" in port_text:
            return None
    if not name:
        return None
    if port_text == "":
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def _is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _same_address(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def normalize_origin(value: str) -> str:
    """``scheme://host[:port]`` in lower case without a trailing slash (how browsers send it)."""
    return value.strip().rstrip("/").lower()


def _entries(values: Iterable[str] | None) -> list[str]:
    out: list[str] = []
    for value in values or ():
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """Which Host names and Origins a server accepts. ``*`` in either list switches that check off."""

    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    _names: dict[str, int | None] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for entry in self.allowed_hosts:
            if entry == "*":
                continue
            parsed = _split_host(entry)
            if parsed is None:
                raise ValueError(f"not a host name or host:port: {entry!r}")
            name, port = parsed
            # A name listed without a port allows any port (a reverse proxy may use 80, 443 or its own).
            self._names[f"{name}:{port}" if port is not None else name] = port

    @classmethod
    def from_options(
        cls,
        hosts: Iterable[str] | None = None,
        origins: Iterable[str] | None = None,
        environ: dict[str, str] | None = None,
    ) -> RequestPolicy:
        """Options (repeatable or comma-separated) plus ``$SESSIONWATCH_ALLOWED_HOSTS``/``..._ORIGINS``."""
        env = os.environ if environ is None else environ
        h = _entries([*(hosts or ()), env.get(ENV_HOSTS, "")])
        o = _entries([*(origins or ()), env.get(ENV_ORIGINS, "")])
        return cls(tuple(h), tuple(o if "*" in o else (normalize_origin(x) for x in o)))

    def host_problem(self, host: bytes | None, server: tuple[str, int] | None, scheme: str) -> str | None:
        if "*" in self.allowed_hosts:
            return None
        text = (host or b"").decode("latin-1")
        parsed = _split_host(text)
        if parsed is None:
            return "the Host header is missing or malformed"
        name, port = parsed
        if name in self._names or f"{name}:{port}" in self._names:
            return None
        local_addr, local_port = server if server else (None, None)
        effective = port if port is not None else (443 if scheme == "https" else 80)
        if effective == local_port and (
            _is_loopback_name(name) or (local_addr is not None and _same_address(name, local_addr))
        ):
            return None
        # The refused name is not echoed back: a response must never reflect what a page chose to send.
        return (
            "the Host header is not this server's name; a browser page may be trying DNS rebinding. "
            f"Name it with --allowed-host (or ${ENV_HOSTS}) to allow it"
        )

    def same_origin(self, origin: bytes, host: bytes | None, fetch_site: bytes | None) -> bool:
        """Is ``origin`` this server itself (the page at /ui calling its own gateway)?

        Only when the Host check really ran (not switched off with ``*``): a rebinding page sends its own
        name as both Host and Origin, and that name must already have been refused by the Host check. A
        browser that says the request is cross-site is never taken as same-origin."""
        if "*" in self.allowed_hosts or host is None:
            return False
        if fetch_site is not None and fetch_site.strip().lower() != b"same-origin":
            return False
        scheme, sep, rest = normalize_origin(origin.decode("latin-1")).partition("://")
        if not sep or scheme not in ("http", "https"):
            return False
        theirs, ours = _split_host(rest), _split_host(host.decode("latin-1"))
        if theirs is None or ours is None:
            return False
        default = 443 if scheme == "https" else 80
        return theirs[0] == ours[0] and (theirs[1] or default) == (ours[1] or default)

    def origin_problem(self, origin: bytes | None, fetch_site: bytes | None, host: bytes | None = None) -> str | None:
        if "*" in self.allowed_origins:
            return None
        if origin is not None:
            text = origin.decode("latin-1")
            if normalize_origin(text) in self.allowed_origins or self.same_origin(origin, host, fetch_site):
                return None
            return (
                f"Origin {text!r} is not allowed: browser pages may not call this server unless their "
                f"origin is listed with --allowed-origin (or ${ENV_ORIGINS})"
            )
        if fetch_site is not None and fetch_site.strip().lower() in CROSS_SITE:
            return "a cross-site browser request without an allowed Origin is not accepted"
        return None


def _has_body(headers: dict[bytes, bytes]) -> bool:
    length = headers.get(b"content-length")
    if length is not None:
        return length.strip() not in (b"0", b"")
    return b"transfer-encoding" in headers


def _is_json(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json"


def _lower_content_type(scope: Scope) -> Scope:
    """The scope with its Content-Type in lower case (media types and charset names are case-insensitive;
    the MCP SDK compares ``application/json`` exactly)."""
    headers = [(n, v.lower()) if n == b"content-type" else (n, v) for n, v in scope["headers"]]
    return {**scope, "headers": headers}


async def send_json_error(send: Send, status: int, code: str, message: str) -> None:
    payload = dumps({"error": {"code": code, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class BrowserGuard:
    """The ASGI layer: 421 for a foreign Host, 403 for a disallowed Origin, 415 for a non-JSON body."""

    def __init__(self, app: ASGIApp, *, policy: RequestPolicy | None = None) -> None:
        self.app = app
        self.policy = policy or RequestPolicy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)  # the first of a repeated header, as the routes read it
        try:
            authorization_of(scope["headers"])
        except InvalidArgument as exc:
            await send_json_error(send, 400, exc.code, exc.message)
            return
        problem = self.policy.host_problem(headers.get(b"host"), scope.get("server"), scope.get("scheme", "http"))
        if problem is not None:
            await send_json_error(send, 421, "forbidden", problem)
            return
        problem = self.policy.origin_problem(
            headers.get(b"origin"), headers.get(b"sec-fetch-site"), headers.get(b"host")
        )
        if problem is not None:
            await send_json_error(send, 403, "forbidden", problem)
            return
        content_type = headers.get(b"content-type")
        if _has_body(headers) and not _is_json(content_type):
            given = (content_type or b"").decode("latin-1") or "none"
            await send_json_error(
                send,
                415,
                "invalid_argument",
                f"a request body must be sent as 'Content-Type: application/json' (got {given})",
            )
            return
        if content_type is not None and content_type != content_type.lower():
            scope = _lower_content_type(scope)
        await self.app(scope, receive, send)
