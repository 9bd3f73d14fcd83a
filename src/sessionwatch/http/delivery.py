"""The one-call drain over HTTP: a notice leaves the queue only once its answer is complete.

The route leases the queue's free entries to this answer (``Gateway.deliver_system_events``), writes
the answer chunked, waits until its body left this process with the client still connected, renews the
lease, acknowledges the entries, and only then sends the final chunk. So:

- a client that went away before the end (its connection dropped or was reset) never has a complete
  answer, and its entries are released for the next drain at once;
- a gateway killed anywhere before the acknowledgment leaves a lease that runs out
  (``SESSIONWATCH_DRAIN_LEASE_MS``), and the entries are back for the next drain, here or on another
  gateway: at least once, never lost;
- an acknowledgment that fails (the database went away) cuts the answer short: never a complete answer
  whose entries come again in another complete one;
- concurrent drains of one watcher (on any gateway sharing the store) skip each other's leased
  entries, and an answer whose lease was taken over is cut short, so no entry is in two complete
  answers at once.

What the server cannot see is a client that reads the complete answer into its kernel and then loses
it; such a client peeks and acknowledges by id itself (``system-events/ack``).

A request to this gateway waits for the store phases of drains begun before it arrived (``_Phases``),
so a client's next call here sees its previous answer acknowledged. Another gateway may see that a
moment later; its drains skip the leased entries meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from ..engine import Gateway
from ..engine.leases import Delivery
from ..repeats import RepeatedFailures
from ..serving.peer import client_gone
from .jsonio import json_response

log = logging.getLogger("sessionwatch.http")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted


class DrainNotAcknowledged(RuntimeError):
    """Raised after a drain's answer started but could not be completed: the server cuts the answer."""


class _Phases:
    """The store phases of drains in progress in this process (taking a lease; completing an answer and
    acknowledging it; releasing one). A request waits for those begun before it arrived, so a client's
    next call here sees its previous drain settled, as if the acknowledgment had come before the end
    of the answer. Writing an answer to its client is never such a phase: a slow reader stalls no one."""

    def __init__(self) -> None:
        self._open: set[anyio.Event] = set()

    @asynccontextmanager
    async def phase(self) -> AsyncIterator[None]:
        done = anyio.Event()
        self._open.add(done)
        try:
            yield
        finally:
            self._open.discard(done)
            done.set()

    async def wait_begun(self) -> None:
        for done in list(self._open):
            await done.wait()


_phases = _Phases()
wait_for_drains = _phases.wait_begun  # endpoints.py: every request starts with it


async def _release(delivery: Delivery, key: object) -> None:
    """Free the entries of an answer that will not complete (shielded: a cancelled request still frees)."""
    with anyio.CancelScope(shield=True):
        try:
            await anyio.to_thread.run_sync(delivery.release)
        except Exception as exc:  # noqa: BLE001 - the lease then runs out instead (logged)
            failure_log.warning(
                "releasing the drained entries of %s failed; they come back when the lease ends: %s", key, exc
            )


def with_withheld(gw: Gateway, key: object, agent_id: object, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` (entries just peeked or leased) with ``withheld``: how many more watched sessions
    changed than a full queue holds notices for (engine/evicted.py). Absent when none, or when counting
    failed: the entries go out anyway."""
    try:
        more = gw.withheld_notices(key, agent_id=agent_id, shown=answer["entries"])
    except Exception as exc:  # noqa: BLE001 - the field is a courtesy (logged)
        failure_log.warning("counting the withheld notices of %s failed: %s", key, exc)
        more = 0
    return {**answer, "withheld": more} if more else answer


async def drain_response(request: Request, gw: Gateway, key: object, agent_id: object) -> Any:
    async with _phases.phase():
        delivery = await anyio.to_thread.run_sync(lambda: gw.deliver_system_events(key, agent_id=agent_id))
        if not delivery.entries:
            return json_response({"entries": []})
        body = await anyio.to_thread.run_sync(lambda: with_withheld(gw, key, agent_id, {"entries": delivery.entries}))
        if await client_gone(request.scope, request.receive):
            log.info("drain of %s: the client went away first; %d entries stay queued", key, len(delivery.entries))
            await _release(delivery, key)
            return json_response({"entries": []})  # nobody reads it
    answer = json_response(body)
    headers = [(k, v) for k, v in answer.raw_headers if k.lower() != b"content-length"]  # chunked

    async def send_answer(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": answer.status_code, "headers": headers})
            await send({"type": "http.response.body", "body": answer.body, "more_body": True})
            # An empty chunk writes nothing, but the server waits with it until the body has left this
            # process (its write buffer drained): a client that stopped reading holds up nothing below.
            await send({"type": "http.response.body", "body": b"", "more_body": True})
        except BaseException:
            with anyio.CancelScope(shield=True):
                async with _phases.phase():
                    await _release(delivery, key)
            raise
        async with _phases.phase():
            await _complete(delivery, key, scope, receive, send)

    return send_answer


async def _complete(delivery: Delivery, key: object, scope: Scope, receive: Receive, send: Send) -> None:
    """Acknowledge a drain's answer whose body went out to a client still there, then complete it; or
    free its entries. The acknowledgment comes before the answer's end: an answer whose entries could not
    be acknowledged (the database went away meanwhile) is cut short, never complete, so no complete
    answer holds an entry another complete answer gets again."""
    settled = False
    try:
        if await client_gone(scope, receive):
            log.info(
                "drain of %s: the connection dropped while answering; %d entries stay queued", key, len(delivery.ids)
            )
            return
        if not await anyio.to_thread.run_sync(delivery.renew):
            # Held too long (a slow reader): another drain has some of these now, or another face
            # acknowledged one. Completing would answer them twice: the answer is cut short instead.
            log.warning("drain of %s: the lease ran out while answering; the answer is cut short", key)
            raise DrainNotAcknowledged(f"the drained entries of {key!r} were leased to another drain")
        try:
            settled = await anyio.to_thread.run_sync(delivery.settle)
        except Exception as exc:
            # The status line is out, so this cannot be a 503 any more: the answer is cut short (no final
            # chunk), which every HTTP client reports as an error; the entries come again when the lease
            # ends (or at once, released below).
            failure_log.warning("acknowledging the drained entries of %s failed; the answer is cut short: %s", key, exc)
            raise DrainNotAcknowledged(f"the drained entries of {key!r} could not be acknowledged") from exc
        if not settled:
            log.warning("drain of %s: its lease was lost before the acknowledgment; the answer is cut short", key)
            raise DrainNotAcknowledged(f"the drained entries of {key!r} were leased to another drain")
        await send({"type": "http.response.body", "body": b""})  # the answer is complete
    finally:
        if not settled:
            await _release(delivery, key)
