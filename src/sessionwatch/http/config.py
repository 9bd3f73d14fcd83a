"""Gateway settings from the environment (documented in docs/http.md). Every face reads the same
variables, so the reader lives in ``sessionwatch.settings``."""

from __future__ import annotations

from ..settings import DATA_SETTINGS, PROCESS_ENV, settings_from_env

# Environment variable -> Settings field (integer milliseconds or counts).
ENV_SETTINGS = {**{d.env: d.field for d in DATA_SETTINGS.values()}, **PROCESS_ENV}

__all__ = ["ENV_SETTINGS", "settings_from_env"]
