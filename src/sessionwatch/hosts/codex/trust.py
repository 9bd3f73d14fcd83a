"""Codex hook trust, established the way Codex's own UI does it: through ``codex app-server``.

Codex runs a hook only after someone trusted its exact definition, and skips the others without a word.
The TUI's "/hooks" review writes ``[hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash``
into the user's ``config.toml``; ``codex app-server`` (JSON-RPC, one object per line on stdio) lets a
program do the same: ``initialize``, ``initialized``, ``hooks/list`` (every hook with its ``key``,
``currentHash`` and ``trustStatus``), then ``config/batchWrite`` upserting ``hooks.state``. The hash is
always the one Codex reports; sessionwatch never computes it. Project hooks are listed only for a trusted
project (``[projects."<dir>"] trust_level``), which is written the same way.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonrpc import LineClient, RpcError

TIMEOUT_S = 30.0  # the whole exchange; measured at 0.2-0.4 s on a busy 2-core machine

TrustError = RpcError


def codex_path() -> str | None:
    return shutil.which("codex")


class AppServer:
    """``codex app-server`` on stdio, started in ``cwd``, initialized; a context manager."""

    def __init__(self, codex: str, cwd: Path, timeout: float = TIMEOUT_S) -> None:
        self.client = LineClient([codex, "app-server"], cwd=cwd, timeout=timeout, name="codex app-server")

    def __enter__(self) -> AppServer:
        try:
            self.client.call(
                "initialize", {"clientInfo": {"name": "sessionwatch", "title": "sessionwatch", "version": "1"}}
            )
            self.client.notify("initialized")
        except RpcError:
            self.client.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def hooks(self, cwd: Path) -> list[dict[str, Any]]:
        result = self.client.call("hooks/list", {"cwds": [str(cwd)]})
        out: list[dict[str, Any]] = []
        for entry in (result or {}).get("data") or []:
            out += [h for h in entry.get("hooks") or [] if isinstance(h, dict)]
        return out

    def write(self, key_path: str, value: dict[str, Any]) -> None:
        self.client.call(
            "config/batchWrite",
            {"edits": [{"keyPath": key_path, "mergeStrategy": "upsert", "value": value}], "reloadUserConfig": True},
        )


@dataclass
class TrustReport:
    ours: list[dict[str, Any]] = field(default_factory=list)  # our hooks as Codex lists them (after trusting)
    trusted_now: list[str] = field(default_factory=list)  # keys trusted by this run
    project_trusted_now: bool = False
    elapsed_ms: float = 0.0

    @property
    def all_trusted(self) -> bool:
        return bool(self.ours) and all(h.get("trustStatus") in ("trusted", "managed") for h in self.ours)


def ours(hooks: list[dict[str, Any]], hooks_path: Path, is_ours: Callable[[object], bool]) -> list[dict[str, Any]]:
    want = hooks_path.resolve()
    return [
        h
        for h in hooks
        if isinstance(h.get("sourcePath"), str)
        and Path(h["sourcePath"]).resolve() == want
        and is_ours(h.get("command"))
    ]


def status(codex: str, cwd: Path, hooks_path: Path, is_ours: Callable[[object], bool]) -> list[dict[str, Any]]:
    """Our hooks as Codex lists them for ``cwd`` (empty: not seen, e.g. the project is not trusted)."""
    with AppServer(codex, cwd) as server:
        return ours(server.hooks(cwd), hooks_path, is_ours)


def trust(codex: str, cwd: Path, hooks_path: Path, is_ours: Callable[[object], bool], *, project: bool) -> TrustReport:
    """Trust our hooks in ``hooks_path`` (and, for a project install, the project folder, without which
    Codex reads nothing of ``.codex/``), as the TUI would. Hooks of others are never touched."""
    started = time.monotonic()
    report = TrustReport()
    with AppServer(codex, cwd) as server:
        found = ours(server.hooks(cwd), hooks_path, is_ours)
        if not found and project:
            server.write("projects", {str(cwd): {"trust_level": "trusted"}})
            report.project_trusted_now = True
            found = ours(server.hooks(cwd), hooks_path, is_ours)
        if not found:
            raise TrustError(f"Codex does not list the hooks of {hooks_path} (are hooks turned off?)")
        todo = {h["key"]: {"trusted_hash": h["currentHash"]} for h in found if h.get("trustStatus") != "trusted"}
        if todo:
            server.write("hooks.state", todo)
            report.trusted_now = sorted(todo)
            found = ours(server.hooks(cwd), hooks_path, is_ours)
        report.ours = found
    report.elapsed_ms = (time.monotonic() - started) * 1000
    if not report.all_trusted:
        states = ", ".join(f"{h.get('eventName')}: {h.get('trustStatus')}" for h in report.ours)
        raise TrustError(f"Codex still reports the hooks as not trusted ({states})")
    return report
