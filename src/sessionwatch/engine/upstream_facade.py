"""Upstream: the engine's face of ``sessionwatch.upstream`` (catalogs, adoption links, the monitor, paired
nodes), imported on first use so that a process that never adopts a thread never loads it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import validation
from .core import GatewayCore

if TYPE_CHECKING:  # imported on first use at run time (see UpstreamFacade.upstream)
    from ..upstream.service import UpstreamService


class UpstreamFacade(GatewayCore):
    """Catalog threads, adoption, the monitor's tick and nudge, node pairing."""

    _upstream: UpstreamService | None

    # -- upstream monitoring (sessionwatch.upstream; imported on first use) -----------------------
    @property
    def upstream(self) -> UpstreamService:
        """The upstream service: catalogs, adoption links and the monitor."""
        if self._upstream is None:
            from ..upstream.service import UpstreamService

            self._upstream = UpstreamService(self)
        return self._upstream

    def list_threads(self, catalog_id: str) -> list[dict[str, Any]]:
        return self.upstream.list_threads(catalog_id)

    def continue_thread(
        self,
        catalog_id: str,
        thread_id: str,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
        host_id: str = "gateway:local",
    ) -> dict[str, Any]:
        return self.upstream.continue_thread(
            catalog_id, thread_id, session_key=session_key, agent_id=agent_id, host_id=host_id
        )

    def link(self, session_key: str, agent_id: str | None = None) -> dict[str, Any] | None:
        return self.upstream.link(session_key, agent_id)

    def thread_links(
        self, catalog_id: str, thread_id: str | None = None, file_path: str | None = None
    ) -> list[dict[str, Any]]:
        """The links of one catalog thread, newest first: by thread id, or by a local link's transcript file.
        Read without the upstream service (it loads the HTTP client): the hook command asks on every run."""
        from ..upstream.links import thread_links

        return thread_links(self.store, catalog_id, thread_id, file_path)

    def upstream_tick(self) -> dict[str, Any]:
        return self.upstream.tick()

    def nudge(self, session_key: object, agent_id: object = None, *, wait_ms: object = 0) -> dict[str, Any]:
        """Scan the session's adopted thread now (a hook saw a prompt submitted there), looking again for
        up to ``wait_ms`` (0–10000) while the host has not written the prompt's row yet."""
        row = self.session(session_key, agent_id)  # an unknown session is NotFound, as on every session route
        wait = validation.integer(wait_ms, "waitMs", minimum=0, maximum=10_000)
        return self.upstream.nudge(row.session_key, row.agent_id, retry_ms=wait)

    def upstream_results(self) -> dict[str, Any]:
        return self.upstream.last_results()

    def pair_node(self, node_id: str, url: str, token: str, *, verify: bool = True) -> dict[str, Any]:
        return self.upstream.pair_node(node_id, url, token, verify=verify)
