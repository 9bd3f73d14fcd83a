"""OpenCode (npm ``opencode-ai``, pinned in tests/support/hosts.py) in a scratch home, against a fake model
server speaking OpenAI chat completions.

OpenCode reads ``<project>/opencode.json`` (a provider ``fake`` through ``@ai-sdk/openai-compatible``, which
it bundles), takes its folder from ``$PWD`` (not the process's working directory), and keeps every session
in one SQLite database under ``$XDG_DATA_HOME/opencode``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.support.hosts import HostHome, Run, opencode


class OpenCodeHome(HostHome):
    name = "opencode"

    def __init__(self, root: Path, model_url: str, binary: Path | None = None) -> None:
        super().__init__(root, binary or opencode(), model_url)
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "fake",
                    "options": {"baseURL": f"{model_url}/v1", "apiKey": "fake-key"},
                    "models": {"fake-model": {"name": "fake"}},
                }
            },
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
        }
        (self.project / "opencode.json").write_text(json.dumps(config, indent=2))

    def _host_env(self) -> dict[str, str]:
        return {
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "PWD": str(self.project),
        }

    @property
    def db_path(self) -> Path:
        return self.home / ".local" / "share" / "opencode" / "opencode.db"

    def prompt(self, text: str, *more: str, timeout: float = 180.0) -> Run:
        return self.run("run", *more, text, timeout=timeout)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def sessions(self) -> list[str]:
        """Top-level session ids, oldest first."""
        return [r[0] for r in self.query("SELECT id FROM session WHERE parent_id IS NULL ORDER BY time_created")]
