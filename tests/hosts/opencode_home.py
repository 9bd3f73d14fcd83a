"""OpenCode (npm ``opencode-ai``, pinned in tests/support/hosts.py) in a scratch home, against a fake model
server speaking OpenAI chat completions.

OpenCode reads ``<project>/opencode.json`` (a provider ``fake`` through ``@ai-sdk/openai-compatible``, which
it bundles), takes its folder from ``$PWD`` (not the process's working directory), and keeps every session
in one SQLite database under ``$XDG_DATA_HOME/opencode``.

On its first start in a home, OpenCode npm-installs its own plugin package (``@opencode-ai/plugin``, about
4,000 files) into its config folder, and a project with a plugin waits for it: some 5 s and 4 s of CPU per
scratch home, most of an OpenCode test's first run. A real machine does this once, so each scratch home
gets a copy (hard links) of that folder, installed once per machine by OpenCode itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from tests.support.hosts import OPENCODE_VERSION, HostHome, Run, cache_dir, opencode

# What OpenCode's first start installs into its config folder (its opencode.jsonc is left to each home).
DEPENDENCIES = ("node_modules", "package.json", "package-lock.json", ".gitignore")


class OpenCodeHome(HostHome):
    name = "opencode"

    def __init__(self, root: Path, model_url: str, binary: Path | None = None, *, seeded: bool = True) -> None:
        super().__init__(root, binary or opencode(), model_url)
        source = installed_dependencies(self.binary) if seeded else None
        if source is not None:
            _copy_dependencies(source, self.home / ".config" / "opencode")
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


_UNINSTALLABLE: list[str] = []  # why the install failed in this process (then each home installs its own)


def installed_dependencies(binary: Path) -> Path | None:
    """The config folder's dependencies as OpenCode's own first start installs them: once per machine and
    version (a lock keeps parallel workers from installing twice), in the hosts' cache. None when that
    install failed (the registry unreachable): each home then does what OpenCode does without them."""
    done = cache_dir() / f"opencode-config-{OPENCODE_VERSION}"
    if (done / "node_modules" / "@opencode-ai" / "plugin" / "package.json").exists():
        return done
    if _UNINSTALLABLE:
        return None
    done.parent.mkdir(parents=True, exist_ok=True)
    with open(done.parent / f".opencode-config-{OPENCODE_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            why = _install_dependencies(binary, done)
            if why:
                _UNINSTALLABLE.append(why)
                print(f"OpenCode's dependencies not prepared once per machine: {why}")
                return None
    return done


def _install_dependencies(binary: Path, done: Path) -> str:
    from tests.support.fake_model import FakeModel  # the one run that installs them needs a model

    with tempfile.TemporaryDirectory(dir=done.parent) as scratch, FakeModel("chat", default="ok") as model:
        home = OpenCodeHome(Path(scratch), model.url, binary, seeded=False)
        # a project plugin makes the run wait for the install instead of leaving it half done at exit
        (home.project / "noop.js").write_text("export const Noop = async () => ({});\n")
        config = json.loads((home.project / "opencode.json").read_text())
        (home.project / "opencode.json").write_text(json.dumps({**config, "plugin": ["./noop.js"]}))
        res = home.prompt("hello")
        installed = home.home / ".config" / "opencode"
        if res.returncode != 0 or not (installed / "node_modules" / "@opencode-ai" / "plugin").is_dir():
            return f"its first start installed nothing (exit {res.returncode}): {res.stderr[-1000:]}"
        staged = Path(scratch) / "staged"
        staged.mkdir()
        for name in DEPENDENCIES:
            if (installed / name).exists():
                os.rename(installed / name, staged / name)
        os.rename(staged, done)  # whole or absent: a worker never copies a half-built folder
    return ""


def _copy_dependencies(source: Path, config: Path) -> None:
    config.mkdir(parents=True, exist_ok=True)
    for name in DEPENDENCIES:
        src, dst = source / name, config / name
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
        elif src.exists():
            shutil.copy2(src, dst)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system (a tmpfs /tmp): a copy
        shutil.copy2(src, dst)
