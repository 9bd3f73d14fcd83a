"""A command hook answered by the gateway, with the standard library: one POST, no HTTP client to load.

Through a gateway the hook's whole run is the gateway's hook route (``POST /v1/sessions/{key}/hooks/{host}``,
or ``/v1/hooks/{host}`` for the host session's own key): it writes what the event says, delivers and keeps
the answer state. Loading the HTTP client and the engine's modules costs several times a bare Python
start, so a plain ``http://`` gateway is asked here with ``http.client``, within the same budget and with
the same misses as the full run (``down.py``): a transport failure is logged, marked and ends the run;
a gateway remembered as down, ``https``, ``SessionStart`` (its report carries the host's pid, which the
gateway cannot see) or an answer that is not a 200 go to the full run, which says why.
"""

from __future__ import annotations

import json
import os
import sys

from ..hosts import identity
from . import quick

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .down import DownMark

# (not urllib.parse below: importing it is a noticeable part of this run)
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def answer(opts: dict[str, str], raw: bytes) -> bool:
    """True when the gateway answered the hook (its answer printed) or did not answer at all (logged
    and marked, as the full run does); False: the full run decides."""
    host = opts.get("host") or ""
    gateway = opts.get("gateway") or os.environ.get("SESSIONWATCH_GATEWAY") or ""
    room = identity.ROOMS.get(host)  # the registry is loaded already (identity reads it)
    if room is None or not room.gateway_route or not gateway.startswith("http://") or opts.get("log_level") == "debug":
        return False
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict) or not isinstance(data.get("hook_event_name"), str):
        return False
    from .down import Budget, DownMark, Missed, bounded, public

    mark = DownMark(gateway)
    down = mark.reason()
    if down is not None:  # skipped without a connection attempt, as the full run does (run.open_backend)
        event = _logged_event(host, data)
        if event is not None:
            quick.log(opts, "WARNING", f"{event} hook: no answer, the gateway at {public(gateway)} is {down}")
        return True
    if data["hook_event_name"] == "SessionStart":
        return False
    session = opts.get("session") or os.environ.get("SESSIONWATCH_SESSION") or ""
    agent = opts.get("agent") or os.environ.get("SESSIONWATCH_AGENT") or ""
    if session:
        path = f"/v1/sessions/{quote(session, safe=':@')}/hooks/{host}"
    else:
        if identity.host_id(data.get("session_id")) is None:
            return False
        path = f"/v1/hooks/{host}"
    if agent:
        path += f"?agentId={quote(agent, safe='')}"
    where = split(gateway)
    if where is None:
        return False  # not a plain http://host[:port][/path]: the full run
    hostname, port, base = where
    token = opts.get("token") or os.environ.get("SESSIONWATCH_TOKEN") or ""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    def post(timeout: float) -> tuple[int, bytes]:
        return _post(hostname, port, base + path, raw, headers, timeout)

    try:
        status, body = bounded(Budget(), post)
    except (Missed, OSError) as exc:
        _missed(opts, mark, gateway, exc, _logged_event(host, data))
        return True
    if status != 200:
        return False  # an error is an answer: the full run reports it (an old gateway, an unknown session)
    try:
        out = json.loads(body or b"{}")
    except ValueError:
        return False
    if out:
        try:
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the host is gone; the gateway acknowledges only at the session's next hook
    return True


def quote(text: str, safe: str = "") -> str:
    """``urllib.parse.quote(text, safe)``: UTF-8, every byte but the unreserved and ``safe`` ones as
    ``%XX``."""
    keep = _UNRESERVED | frozenset(safe.encode())
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode("utf-8"))


def split(url: str) -> tuple[str, int, str] | None:
    """(host, port, path without its final ``/``) of an ``http://`` URL, as ``urllib.parse.urlsplit``
    reads them; None for one with a query, a fragment, credentials or a port that is not a number."""
    rest = url[len("http://") :] if url[:7].lower() == "http://" else None
    if rest is None or "?" in rest or "#" in rest:
        return None
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        return None
    if netloc.startswith("["):  # an IPv6 literal
        host, bracket, after = netloc[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            return None
        port_text = after[1:]
    else:
        host, _, port_text = netloc.partition(":")
    if port_text and not (port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535):
        return None
    return host.lower() or "127.0.0.1", int(port_text) if port_text else 80, (slash + path).rstrip("/")


def _post(host: str, port: int, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 POST on a fresh connection, read to its end: ``(status, body)``. A plain socket:
    ``http.client`` imports the email parser and ssl, more than the rest of the run together."""
    named = f"[{host}]" if ":" in host else host
    head = [f"POST {path} HTTP/1.1", f"Host: {named}:{port}", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    sock = _connect(host, port, timeout)
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    try:
        return _parse(b"".join(chunks))
    except (ValueError, IndexError) as exc:
        raise OSError(f"the gateway's answer could not be read: {exc}") from None


def _connect(host: str, port: int, timeout: float) -> Any:
    """``socket.create_connection`` with the C module alone (``socket.py`` loads selectors, array and
    math: a noticeable part of this run). The host goes as bytes: given a str, the resolver loads the IDNA
    codec."""
    import _socket

    address = host.encode() if host.isascii() else host.encode("idna")
    failed: OSError | None = None
    for family, kind, proto, _, where in _socket.getaddrinfo(address, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(where)
            return sock
        except OSError as exc:
            sock.close()
            failed = exc
    raise failed or OSError(f"no address for {host}")


def _parse(raw: bytes) -> tuple[int, bytes]:
    top, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise OSError("the gateway's answer ended before its headers did")
    lines = top.split(b"\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        out, pos = b"", 0
        while True:
            end = rest.index(b"\r\n", pos)
            size = int(rest[pos:end].split(b";")[0], 16)
            if size == 0:
                return status, out
            out += rest[end + 2 : end + 2 + size]
            pos = end + 2 + size + 2
    if b"content-length" in fields:
        rest = rest[: int(fields[b"content-length"])]
    return status, rest


def _logged_event(host: str, data: dict[str, object]) -> str | None:
    """How the full run names the event in its log (``run.answerable``: ``None`` for an event it only
    writes down), or None when the full run would end before opening the gateway (an event it ignores)."""
    hook = identity.ROOMS[host].hook
    event = data.get("hook_event_name")
    if event in hook.events:
        return "None" if event == "Stop" and data.get("stop_hook_active") is True else str(event)
    return "None" if event in hook.observes else None


def _missed(opts: dict[str, str], mark: DownMark, gateway: str, exc: BaseException, event: str | None) -> None:
    """The full run's miss, word for word (run._Remote._call): remembered, and logged (without loading
    ``logging``: ``quick.log``)."""
    from .down import REMEMBER_S, Missed, public

    why = str(exc) if isinstance(exc, Missed) else f"{exc.__class__.__name__}: {exc}"
    mark.mark(why)
    missed = f"the gateway at {public(gateway)} did not answer: {why}"
    quick.log(opts, "WARNING", f"{missed}; hook runs skip it for the next {REMEMBER_S:g} s")
    if event is not None:
        quick.log(opts, "WARNING", f"{event} hook: no answer, {missed} (the notices wait for a later run)")
