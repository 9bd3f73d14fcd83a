"""One small seam between the CLI and the engine: a local ``Gateway`` or a remote ``GatewayClient``.

Both expose the same method names; this wrapper adds the few conveniences the CLI needs (tool errors
raised as exceptions, JSON-shaped results) so commands never care which one they talk to.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from ..errors import InvalidArgument, NotFound, SessionwatchError, StoreUnavailable, error_from_json

# sessions_list, session_status and sessions_history never act as the caller, so an operator identity
# that need not exist is enough to read with them.
OPERATOR = "agent:sessionwatch:cli"


def jsonable(value: Any) -> Any:
    """Results of the local engine can be dataclasses; the remote client returns plain JSON."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _remote_names() -> frozenset[str]:
    """The operations a remote gateway offers: the declared ones and the client's hand-written few."""
    from .. import client_ops  # loaded with the client, only for a remote gateway

    return frozenset(client_ops.OPS) | frozenset(client_ops.CLIENT_METHODS)


class Backend:
    def __init__(self, target: Any, *, remote: bool, where: str) -> None:
        self.target = target
        self.remote = remote
        self.where = where

    @classmethod
    def open(
        cls,
        *,
        store: str | None = None,
        gateway: str | None = None,
        token: str | None = None,
        timers: bool = False,
        read_only: bool = False,
    ) -> Backend:
        """``gateway`` given: talk HTTP to it; otherwise open the store (default store when None).

        A local store is opened with the ``SESSIONWATCH_*`` settings of the environment, checked against
        the store's data settings; never with a forced prune (that is ``serve``'s and ``prune``'s job),
        and with no write at all when ``read_only``."""
        if store and gateway:
            raise InvalidArgument("give --store or --gateway, not both")
        if gateway:
            try:
                from ..client import GatewayClient
            except ImportError as exc:  # pragma: no cover - the client ships with the package
                raise StoreUnavailable(f"the HTTP client is not available: {exc}") from exc
            return cls(GatewayClient(gateway, token=token), remote=True, where=gateway)
        from ..engine import Gateway, default_store_url
        from ..settings import settings_from_env

        url = store or default_store_url()
        settings = settings_from_env()
        try:
            gw = Gateway.open(url, timers=timers, settings=settings, read_only=read_only, prune_on_open=False)
        except SessionwatchError:
            raise
        except Exception as exc:
            raise StoreUnavailable(f"cannot open store {url!r}: {exc}") from exc
        if getattr(gw.store, "created", False):  # said once: only the process that created the file says it
            print(f"sessionwatch: created a new store at {os.path.abspath(gw.store.path)}", file=sys.stderr)
        return cls(gw, remote=False, where=url)

    def close(self) -> None:
        try:
            self.target.close()
        except Exception:  # noqa: BLE001 - closing is best-effort at exit
            pass

    def __getattr__(self, name: str) -> Any:
        # Host operations with identical names on both sides pass straight through. Remotely, only what
        # client_ops declares exists (the client's methods are built from it), so the CLI's remote mode
        # offers exactly the operations the HTTP clients do; anything else is missing (AttributeError),
        # as a feature check with getattr(backend, name, None) expects.
        if self.remote and not name.startswith("_") and name not in _remote_names():
            raise AttributeError(f"{name!r} is not an operation of a remote gateway (see sessionwatch.client_ops)")
        return getattr(self.target, name)

    # -- conveniences ----------------------------------------------------------------------------
    def tool(self, name: str, args: dict[str, Any], *, caller: str, agent_id: str | None = None) -> dict[str, Any]:
        """Run a tool; its error object becomes the matching exception."""
        out = self.target.call_tool(name, args, caller=caller, agent_id=agent_id)
        if isinstance(out, dict) and isinstance(out.get("error"), dict):
            raise error_from_json(out)
        return out

    def list_sessions(self, *, limit: int = 200, agent_id: str | None = None) -> list[dict[str, Any]]:
        return list(self.list_sessions_page(limit=limit, agent_id=agent_id)["sessions"])

    def list_sessions_page(
        self,
        *,
        limit: int = 200,
        agent_id: str | None = None,
        cursor: str | None = None,
        lifecycle: list[str] | None = None,
    ) -> dict[str, Any]:
        """One page of the sessions_list tool: ``sessions`` and, when more follow, ``nextCursor``."""
        args: dict[str, Any] = {"limit": limit}
        if agent_id:
            args["agentId"] = agent_id
        if cursor is not None:
            args["cursor"] = cursor
        if lifecycle:
            args["lifecycle"] = lifecycle
        # With --agent the listing runs as that agent's main session (it need not exist), so a gateway
        # token scoped to that agent may list; the bare operator identity is of no token's agents.
        caller = f"agent:{agent_id}:main" if agent_id else OPERATOR
        return self.tool("sessions_list", args, caller=caller)

    def watch(self, watcher: str, target: str, agent_id: str | None = None) -> bool:
        self.target.get_session(target, agent_id)  # an unknown target is an error, not a silent no-op
        fn = getattr(self.target, "watch", None)
        if fn is None:
            raise StoreUnavailable("this gateway does not offer explicit watches; use a local --store")
        return bool(fn(watcher, target, agent_id=agent_id))

    def prune(self) -> dict[str, Any]:
        return jsonable(self.target.prune(force=True))

    def link(self, key: str, agent_id: str | None = None) -> dict[str, Any]:
        out = self.target.link(key, agent_id)
        if out is None:
            raise NotFound(f"session {key!r} is not linked to a catalog thread")
        return jsonable(out)
