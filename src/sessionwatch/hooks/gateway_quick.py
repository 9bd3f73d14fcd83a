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
from urllib.parse import quote, urlsplit

from ..hosts import identity
from ..hosts.registry import ROOMS

PATHS = {name for name, room in ROOMS.items() if room.gateway_route}  # hosts the gateway's hook route answers


def answer(opts: dict[str, str], raw: bytes) -> bool:
    """True when the gateway answered the hook (its answer printed) or did not answer at all (logged
    and marked, as the full run does); False: the full run decides."""
    host = opts.get("host") or ""
    gateway = opts.get("gateway") or os.environ.get("SESSIONWATCH_GATEWAY") or ""
    if host not in PATHS or not gateway.startswith("http://") or opts.get("log_level") == "debug":
        return False
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict) or not isinstance(data.get("hook_event_name"), str):
        return False
    if data["hook_event_name"] == "SessionStart":
        return False
    from .down import Budget, DownMark, Missed, bounded

    mark = DownMark(gateway)
    if mark.reason() is not None:
        return False  # the full run skips it and says so
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
    url = urlsplit(gateway)
    token = opts.get("token") or os.environ.get("SESSIONWATCH_TOKEN") or ""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    base = url.path.rstrip("/")

    def post(timeout: float) -> tuple[int, bytes]:
        return _post(url.hostname or "127.0.0.1", url.port or 80, base + path, raw, headers, timeout)

    try:
        status, body = bounded(Budget(), post)
    except (Missed, OSError) as exc:
        _missed(opts, mark, gateway, exc, str(data["hook_event_name"]))
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


def _post(host: str, port: int, path: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 POST on a fresh connection, read to its end: ``(status, body)``. A plain socket:
    ``http.client`` imports the email parser and ssl, more than the rest of the run together."""
    import socket

    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    try:
        return _parse(b"".join(chunks))
    except (ValueError, IndexError) as exc:
        raise OSError(f"the gateway's answer could not be read: {exc}") from None


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


def _missed(opts: dict[str, str], mark: object, gateway: str, exc: BaseException, event: str) -> None:
    """The full run's miss, word for word (run._Remote._call): logged, remembered."""
    from .down import REMEMBER_S, DownMark, Missed, public
    from .run import log, setup_logging

    level = opts.get("log_level", "warning")
    setup_logging(opts.get("log_file"), "info" if level == "warning" else level)
    why = str(exc) if isinstance(exc, Missed) else f"{exc.__class__.__name__}: {exc}"
    assert isinstance(mark, DownMark)
    mark.mark(why)
    missed = f"the gateway at {public(gateway)} did not answer: {why}"
    log.warning("%s; hook runs skip it for the next %g s", missed, REMEMBER_S)
    log.warning("%s hook: no answer, %s (the notices wait for a later run)", event, missed)
