"""Tunable constants. The defaults are the documented values; every one can be overridden."""

from __future__ import annotations

from dataclasses import dataclass

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Settings:
    retention_ms: int = 30 * DAY_MS
    max_events: int = 50_000
    prune_interval_ms: int = 60 * 60 * 1000
    occurred_at_window_ms: int = DAY_MS
    changes_page_size: int = 200
    queue_cap: int = 20
    wake_coalesce_ms: int = 20_000
    own_recent_texts: int = 10
    scan_window_bytes: int = 1 << 20
    missing_threshold: int = 3
    monitor_first_tick_ms: int = 15_000
    monitor_interval_ms: int = 60_000
    provider_timeout_ms: int = 45_000
    node_page_size: int = 50
    node_max_pages: int = 10
    # Beyond v1: a watcher's session_status with changesSince acknowledges what it returned (its cursor
    # moves, a covered notice is withdrawn). False restores strict v1: reads never move cursors.
    reconcile_acknowledges: bool = True


# Input limits (bad input beyond them is an invalid_argument error).
MAX_TEXT_BYTES = 1 << 20
MAX_NAME_LENGTH = 200
MAX_LIST_LIMIT = 1000
