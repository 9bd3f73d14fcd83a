"""The transport-free half of the MCP face: run a tool as the bound session and let notices ride along.

An MCP client has no reliable server push (2026-era push streams are not a replay log), so the durable
system-event queue of the bound session is drained after every tool call and its lines travel inside the
result. Draining is the acknowledgment: each notice rides along exactly once.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import NotFound, SessionwatchError

log = logging.getLogger("sessionwatch.mcp")


class ToolBackend(Protocol):
    """What the MCP face needs; both ``Gateway`` and ``GatewayClient`` provide it."""

    def call_tool(self, name: str, args: dict[str, Any] | None = None, *, caller: str,
                  agent_id: str | None = None) -> dict[str, Any]: ...

    def get_session(self, key: Any, agent_id: Any = None) -> dict[str, Any]: ...

    def put_session(self, key: Any, **kwargs: Any) -> dict[str, Any]: ...

    def drain_system_events(self, key: Any, *, agent_id: Any = None) -> list[dict[str, Any]]: ...


@dataclass
class ToolOutcome:
    """One tool result as the MCP face publishes it."""

    payload: dict[str, Any]
    system_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return isinstance(self.payload.get("error"), dict)

    def text(self) -> str:
        """The System lines first (what a harness prepends to a turn), then the tool's own text."""
        body = json.dumps(self.payload, ensure_ascii=False) if self.is_error else str(self.payload.get("text", ""))
        lines = [str(e.get("line", "")) for e in self.system_events]
        return "\n".join(lines) + "\n\n" + body if lines else body

    def structured(self) -> dict[str, Any]:
        return {**self.payload, "systemEvents": list(self.system_events)}


class SessionBinding:
    """Every call runs as ``session_key``; its pending notices are drained into each result."""

    def __init__(self, backend: ToolBackend, session_key: str, agent_id: str | None = None) -> None:
        self.backend = backend
        self.session_key = session_key
        self.agent_id = agent_id

    def ensure_session(self) -> dict[str, Any]:
        """Create the bound session when missing; an existing one is left exactly as it is."""
        try:
            return self.backend.get_session(self.session_key, self.agent_id)
        except NotFound:
            log.info("creating bound session %s", self.session_key)
            return self.backend.put_session(self.session_key, agent_id=self.agent_id)

    def drain(self) -> list[dict[str, Any]]:
        try:
            return list(self.backend.drain_system_events(self.session_key, agent_id=self.agent_id))
        except Exception:  # a failed drain leaves the notices queued; the next call delivers them
            log.exception("draining system events of %s failed", self.session_key)
            return []

    def call(self, name: str, args: dict[str, Any] | None, scope: frozenset[str] | None = None) -> ToolOutcome:
        """``scope``: the agents a scoped bearer token covers (HTTP transport); None is unrestricted."""
        try:
            extra: dict[str, Any] = {} if scope is None else {"scope": scope}
            payload = self.backend.call_tool(name, dict(args or {}), caller=self.session_key, agent_id=self.agent_id,
                                             **extra)
        except SessionwatchError as exc:  # a remote gateway raises what the engine would have returned
            payload = exc.to_json()
        except Exception as exc:
            log.exception("tool %s failed", name)
            payload = {"error": {"code": "unavailable", "message": f"{name} failed: {exc}"}}
        # Drained after the call so notices that arose while it ran (a long sessions_send wait) come along too.
        return ToolOutcome(payload, self.drain())
