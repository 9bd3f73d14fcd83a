"""Upstream monitoring: notice when a person types into Claude Code, Codex or a paired machine directly.

Catalogs list threads that live outside sessionwatch; adopting one ("continue") links it to a session
with a baseline marker; the monitor checks watched links on a cadence and records
``human_direct_message`` (a person typed there) or ``upstream_missing`` (the thread is gone). See
docs/upstream.md.
"""

from typing import Any

__all__ = ["UpstreamService"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: the service imports the HTTP client, which a hook run (links only) never needs.
    if name == "UpstreamService":
        from .service import UpstreamService

        return UpstreamService
    raise AttributeError(name)
