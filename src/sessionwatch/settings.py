"""Tunable constants. The defaults are the documented values; every one can be overridden.

Four of them define the data (which notices exist, how much log is kept), so they are stored in the
store when it is created and every process uses the stored values (``DATA_SETTINGS``); the others are
per process.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # Lifecycle (docs/lifecycle.md): a session working or waiting that reports nothing for this long (and
    # whose process, where one was reported on this machine, is gone) becomes ``lost``.
    lost_after_ms: int = 600_000
    # Delivery leases (docs/http.md, "Delivery"): how long a drain over HTTP holds the entries it is
    # answering with before they are back in the queue for another drain (the holder died or is stuck).
    drain_lease_ms: int = 30_000
    # The dashboard's public address (https://host/sw): notices then carry a link to the session's page.
    # None: the notice text is exactly v1's.
    public_url: str | None = None
    # Data settings given on purpose, with where they came from ("SESSIONWATCH_MAX_EVENTS=...", a flag):
    # they must agree with the store's stored values. Not part of equality.
    explicit: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class DataSetting:
    field: str
    env: str
    flag: str
    minimum: int
    meaning: str


# The settings that define the data: stored with the store (migration 0003), one value for every process.
DATA_SETTINGS: dict[str, DataSetting] = {
    d.field: d
    for d in (
        DataSetting("queue_cap", "SESSIONWATCH_QUEUE_CAP", "--queue-cap", 1, "system-event queue entries per session"),
        DataSetting("retention_ms", "SESSIONWATCH_RETENTION_MS", "--retention-ms", 0, "log retention (ms)"),
        DataSetting("max_events", "SESSIONWATCH_MAX_EVENTS", "--max-events", 1, "log row cap"),
        DataSetting(
            "wake_coalesce_ms", "SESSIONWATCH_WAKE_COALESCE_MS", "--wake-coalesce-ms", 0, "wake coalescing window (ms)"
        ),
    )
}

# Per-process boolean settings read from the environment by every face ("1"/"true"/"yes"/"on" or
# "0"/"false"/"no"/"off").
PROCESS_FLAGS = {
    "SESSIONWATCH_RECONCILE_ACKS": "reconcile_acknowledges",
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

# Per-process settings read from the environment by every face (monitor cadence).
PROCESS_ENV = {
    "SESSIONWATCH_MONITOR_INTERVAL_MS": "monitor_interval_ms",
    "SESSIONWATCH_MONITOR_FIRST_TICK_MS": "monitor_first_tick_ms",
    "SESSIONWATCH_LOST_AFTER_MS": "lost_after_ms",
    "SESSIONWATCH_DRAIN_LEASE_MS": "drain_lease_ms",
}
# Per-process text settings read from the environment by every face, each with its check.
PUBLIC_URL_ENV = "SESSIONWATCH_PUBLIC_URL"


def check_public_url(value: object, source: str = PUBLIC_URL_ENV) -> str:
    """A dashboard address to link to: absolute http(s), no query or fragment; kept without a final ``/``."""
    from urllib.parse import urlsplit

    from .errors import InvalidArgument

    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{source} must be an http(s) URL such as https://host/sw")
    url = value.strip()
    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.query
        or parts.fragment
        or "#" in url
        or any(c.isspace() or ord(c) < 0x21 or c in '<>"' for c in url)
    ):
        raise InvalidArgument(f"{source} must be an http(s) URL such as https://host/sw (no query, fragment or spaces)")
    return url.rstrip("/")


def data_values(settings: Settings) -> dict[str, int]:
    return {name: int(getattr(settings, name)) for name in DATA_SETTINGS}


def explicit_data(settings: Settings) -> dict[str, tuple[int, str]]:
    """Data settings the caller chose: named in ``explicit``, or (Python callers) set away from the default."""
    defaults = Settings()
    out: dict[str, tuple[int, str]] = {}
    for name in DATA_SETTINGS:
        value = int(getattr(settings, name))
        if name in settings.explicit:
            out[name] = (value, settings.explicit[name])
        elif value != getattr(defaults, name):
            out[name] = (value, f"Settings({name}={value})")
    return out


def check_value(name: str, value: object, source: str) -> int:
    """A data setting's value: an integer at or above its minimum."""
    spec = DATA_SETTINGS[name]
    from .errors import InvalidArgument

    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isascii() and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    if number is None:
        raise InvalidArgument(f"{source} must be an integer, got {value!r}")
    if number < spec.minimum:
        raise InvalidArgument(f"{source} must be >= {spec.minimum}, got {number}")
    return number


def settings_from_env(base: Settings | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """``base`` plus the ``SESSIONWATCH_*`` settings set in the environment (data ones marked explicit)."""
    from .errors import InvalidArgument

    env = os.environ if environ is None else environ
    base = base or Settings()
    changes: dict[str, Any] = {}  # field name -> value (int or bool), for dataclasses.replace
    explicit = dict(base.explicit)
    for var, name in PROCESS_FLAGS.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        word = raw.strip().lower()
        if word not in _TRUE + _FALSE:
            raise InvalidArgument(f"{var} must be 1 or 0 (true/false), got {raw!r}")
        changes[name] = word in _TRUE
    for spec in DATA_SETTINGS.values():
        raw = env.get(spec.env)
        if raw is None or raw.strip() == "":
            continue
        changes[spec.field] = check_value(spec.field, raw, spec.env)
        explicit[spec.field] = f"{spec.env}={raw.strip()}"
    for var, name in PROCESS_ENV.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = int(raw)
        except ValueError:
            raise InvalidArgument(f"{var} must be an integer, got {raw!r}") from None
        if value < 0:
            raise InvalidArgument(f"{var} must be >= 0, got {value}")
        changes[name] = value
    raw_url = env.get(PUBLIC_URL_ENV)
    if raw_url is not None and raw_url.strip():
        changes["public_url"] = check_public_url(raw_url)
    return dataclasses.replace(base, explicit=explicit, **changes)


# Input limits (bad input beyond them is an invalid_argument error).
MAX_TEXT_BYTES = 1 << 20
MAX_LIST_LIMIT = 1000
MAX_NAME_LENGTH = 200
