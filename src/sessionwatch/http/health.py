"""Liveness and readiness (issue 8 item 5).

- ``GET /v1/health/live``: 200 whenever this process answers HTTP (also while starting or when the
  store is broken); a supervisor restarts the process only when this stops answering.
- ``GET /v1/health/ready`` and ``GET /v1/health``: 200 only when the store accepts a write (a cheap
  write probe) and the restart sweep has run; 503 otherwise, with the reason. Both carry
  ``droppedRecordings: {total, byCause}``.

They need no token, but on a gateway with a token the figures about activity (``streams``,
``droppedRecordings``, ``swept``) are another agent's business: an admin token sees them all, a token
scoped to agents only its agents' (``swept`` not at all), and a request without a valid token none.

The probe runs on its own worker thread (the store may be slow or locked), at most one at a time, its
answer reused for ``PROBE_TTL_S``; a probe that takes longer than ``PROBE_TIMEOUT_S`` answers 503.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import anyio.to_thread

from .. import __version__
from ..engine import Gateway
from .auth import ANY_TOKEN, PRINCIPAL
from .endpoints import Call, Endpoint
from .jsonio import json_response
from .runtime import Runtime, redact_url

PROBE_TTL_S = 1.0
PROBE_TIMEOUT_S = 2.0


class Readiness:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.limiter = anyio.CapacityLimiter(1)  # probes never take threads from requests
        self._task: asyncio.Future[dict[str, Any]] | None = None
        self._last: dict[str, Any] | None = None
        self._last_at = 0.0

    async def check(self, gw: Gateway) -> dict[str, Any]:
        now = time.monotonic()
        if self._last is not None and now - self._last_at < PROBE_TTL_S:
            return self._last
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(anyio.to_thread.run_sync(gw.readiness, limiter=self.limiter))
        try:
            result = await asyncio.wait_for(asyncio.shield(self._task), PROBE_TIMEOUT_S)
        except TimeoutError:
            return {
                "ready": False,
                "writable": False,
                "sweepRan": gw.sweep_ran,
                "message": f"the store did not accept a write within {PROBE_TIMEOUT_S:g} s (locked or stalled)",
                "droppedRecordings": gw.dropped_recordings,
            }
        except Exception as exc:  # noqa: BLE001 - a failed probe is a 503, never a 500
            result = {
                "ready": False,
                "writable": False,
                "sweepRan": gw.sweep_ran,
                "message": f"the readiness probe failed: {exc.__class__.__name__}: {exc}",
                "droppedRecordings": gw.dropped_recordings,
            }
        self._last, self._last_at = result, time.monotonic()
        return result


def routes(runtime: Runtime) -> list[Endpoint]:
    readiness = Readiness(runtime)

    async def ready(c: Call) -> Any:
        gw = runtime.gateway
        if runtime.state != "ok" or gw is None:
            body: dict[str, Any] = {"status": runtime.state, "version": __version__}
            if runtime.message:
                body["message"] = runtime.message
            return json_response(body, 503)
        probe = await readiness.check(gw)
        body = {
            "status": "ok" if probe["ready"] else "unavailable",
            "storeUrl": redact_url(getattr(gw.store, "url", "")),
            "version": __version__,
            "writable": probe["writable"],
            "sweepRan": probe["sweepRan"],
        }
        principal = c.request.scope.get(PRINCIPAL)  # resolved only when a valid token came along
        if principal is not None and (principal.admin or principal.token_id is not None):
            agents = principal.agent_filter()
            if agents is None:
                body["swept"] = gw.swept
            body["streams"] = runtime.streams_of(agents)  # current, not as of the cached probe
            body["droppedRecordings"] = gw.dropped_recordings_of(agents)
        if not probe["ready"]:
            body["message"] = probe.get("message", "not ready")
            return json_response(body, 503)
        return body

    async def live(c: Call) -> Any:
        return {"status": "live", "state": runtime.state, "version": __version__}

    doc = (
        "Readiness: 200 {status: ok, storeUrl, version, swept, streams, writable, sweepRan, droppedRecordings} "
        "when the store accepts a write and the restart sweep has run; otherwise 503 with status starting, "
        "failed, stopping or unavailable and a message. Needs no token; on a gateway with a token, swept, "
        "streams and droppedRecordings come only with one (a scoped token's: its own agents', no swept)."
    )
    return [
        Endpoint(
            "GET",
            "/v1/health",
            "health",
            doc + " Same as /v1/health/ready.",
            ready,
            tag="meta",
            needs_gateway=False,
            touches=ANY_TOKEN,
        ),
        Endpoint(
            "GET", "/v1/health/ready", "health_ready", doc, ready, tag="meta", needs_gateway=False, touches=ANY_TOKEN
        ),
        Endpoint(
            "GET",
            "/v1/health/live",
            "health_live",
            "Liveness: 200 {status: live, state, version} whenever the "
            "process answers, whatever the store's state. Needs no token.",
            live,
            tag="meta",
            needs_gateway=False,
            touches=ANY_TOKEN,
        ),
    ]
