"""The one-call drain over HTTP, delivered at least once where the server can tell.

A drain used to consume the queue before the answer was written, so a client whose connection dropped
lost its notices for good. Here the route peeks (stable ids), writes the answer, and acknowledges
those ids only after the body went out and the client was still connected (the chunked answer ends
after the acknowledgment, so the client's next call sees it); a client that went away before finds
the same entries on its next call. What the server cannot see (bytes that reached the
client's kernel but never its code) needs peek + ``system-events/ack`` from the client.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ..engine import Gateway
from ..repeats import RepeatedFailures
from .jsonio import json_response

log = logging.getLogger("sessionwatch.http")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


class DrainNotAcknowledged(RuntimeError):
    """Raised after a drain's answer started but its acknowledgment failed: the server cuts the answer."""


async def _gone(receive: Receive) -> bool:
    """Has the client disconnected? Looks at what the server already knows, never waits."""
    await anyio.lowlevel.checkpoint()  # let the event loop take in a pending close first
    with anyio.CancelScope() as scope:
        scope.cancel()
        message = await receive()
        return bool(message.get("type") == "http.disconnect")
    return False


async def drain_response(request: Request, gw: Gateway, key: object, agent_id: object) -> Any:
    entries = await anyio.to_thread.run_sync(lambda: gw.peek_system_events(key, agent_id=agent_id))
    answer = json_response({"entries": entries})
    ids = [e["id"] for e in entries]

    async def send_then_ack(scope: Scope, receive: Receive, send: Send) -> None:
        if ids and await _gone(receive):
            log.info("drain of %s: the client went away first; %d entries stay queued", key, len(ids))
            return
        headers = answer.raw_headers
        if ids:  # chunked: the answer ends only after the acknowledgment, so a next call sees it done
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        await send({"type": "http.response.start", "status": answer.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body, "more_body": bool(ids)})
        if not ids:
            return
        if await _gone(receive):
            log.info("drain of %s: the connection dropped while answering; %d entries stay queued", key, len(ids))
            return
        try:
            await anyio.to_thread.run_sync(lambda: gw.ack_system_events(key, ids, agent_id=agent_id))
        except Exception as exc:
            # The status line is out, so the failure cannot be a 503 any more: the answer is cut short
            # instead (no final chunk), which every HTTP client reports as an error, never as a drain
            # that succeeded. The entries stay queued and come again: at least once.
            failure_log.warning("acknowledging the drained entries of %s failed; the answer is cut short: %s", key, exc)
            raise DrainNotAcknowledged(f"the drained entries of {key!r} could not be acknowledged") from exc
        await send({"type": "http.response.body", "body": b""})

    return send_then_ack
