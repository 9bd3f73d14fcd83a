"""Gateway settings from the environment (documented in docs/http.md)."""

from __future__ import annotations

import dataclasses
import os

from ..errors import InvalidArgument
from ..settings import Settings

# Environment variable -> Settings field (integer milliseconds or counts).
ENV_SETTINGS = {
    "SESSIONWATCH_WAKE_COALESCE_MS": "wake_coalesce_ms",
    "SESSIONWATCH_QUEUE_CAP": "queue_cap",
    "SESSIONWATCH_RETENTION_MS": "retention_ms",
    "SESSIONWATCH_MAX_EVENTS": "max_events",
    "SESSIONWATCH_MONITOR_INTERVAL_MS": "monitor_interval_ms",
    "SESSIONWATCH_MONITOR_FIRST_TICK_MS": "monitor_first_tick_ms",
}


# Environment variable -> boolean Settings field ("1"/"true"/"yes"/"on" or "0"/"false"/"no"/"off").
ENV_FLAGS = {
    "SESSIONWATCH_RECONCILE_ACKS": "reconcile_acknowledges",
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def settings_from_env(base: Settings | None = None, environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    changes: dict[str, int | bool] = {}
    for var, field in ENV_FLAGS.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        word = raw.strip().lower()
        if word not in _TRUE + _FALSE:
            raise InvalidArgument(f"{var} must be 1 or 0 (true/false), got {raw!r}")
        changes[field] = word in _TRUE
    for var, field in ENV_SETTINGS.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = int(raw)
        except ValueError:
            raise InvalidArgument(f"{var} must be an integer, got {raw!r}") from None
        minimum = 1 if field in ("queue_cap", "max_events") else 0
        if value < minimum:
            raise InvalidArgument(f"{var} must be >= {minimum}, got {value}")
        changes[field] = value
    return dataclasses.replace(base or Settings(), **changes)
