"""Upstream monitoring: notice when a person types into Claude Code, Codex or a paired machine directly.

Catalogs list threads that live outside sessionwatch; adopting one ("continue") links it to a session
with a baseline marker; the monitor checks watched links on a cadence and records
``human_direct_message`` (a person typed there) or ``upstream_missing`` (the thread is gone). See
docs/upstream.md.
"""

from .service import UpstreamService

__all__ = ["UpstreamService"]
