"""Fixtures for upstream monitoring: a gateway with a manual clock whose catalogs point at temp roots."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch import Gateway, Settings
from sessionwatch.clock import ManualClock
from tests.support.ports import listening_socket, port_of

WATCHER = "agent:main:main"


class Harness:
    """One gateway (reopenable on the same store) plus the catalog roots it scans."""

    def __init__(
        self,
        url: str,
        clock: ManualClock,
        claude_root: Path,
        codex_root: Path,
        settings: Settings | None = None,
        scan_budget_s: float | None = None,
    ) -> None:
        self.url = url
        self.clock = clock
        self.claude_root = claude_root
        self.codex_root = codex_root
        self.settings = settings
        self.scan_budget_s = scan_budget_s  # 0: one window per file per tick
        self.gw = self._open()

    def _open(self) -> Gateway:
        gw = Gateway.open(self.url, clock=self.clock, settings=self.settings)
        gw.upstream.configure(claude_root=self.claude_root, codex_root=self.codex_root, node_timeout_s=5)
        if self.scan_budget_s is not None:
            gw.upstream.configure(scan_budget_s=self.scan_budget_s)
        return gw

    def restart(self, settings: Settings | None = None) -> Gateway:
        self.gw.close()
        if settings is not None:
            self.settings = settings
        self.gw = self._open()
        return self.gw

    def close(self) -> None:
        self.gw.close()

    def adopt(self, catalog: str, thread_id: str, *, watcher: str | None = WATCHER, **kw: Any) -> str:
        res = self.gw.continue_thread(catalog, thread_id, **kw)
        assert res["linked"], res
        if watcher is not None:
            if self.gw.store.get_session(watcher, watcher.split(":")[1]) is None:
                self.gw.put_session(watcher)
            self.gw.watch(watcher, res["sessionKey"], agent_id=res["agentId"])
        return res["sessionKey"]

    def tick(self) -> dict[str, Any]:
        self.clock.advance(1000)
        return self.gw.upstream_tick()

    @staticmethod
    def entry(result: dict[str, Any], key: str) -> dict[str, Any]:
        found = [e for e in result["links"] if e["sessionKey"] == key]
        assert len(found) == 1, result
        return found[0]

    def events(self, key: str, kind: str | None = None, agent_id: str | None = None) -> list[dict[str, Any]]:
        page = self.gw.changes_since(key, 0, agent_id=agent_id)
        return [e for e in page.to_json()["events"] if kind is None or e["kind"] == kind]

    def human_turns(self, key: str) -> int:
        """Sum of turns over the session's human_direct_message events (1 when no payload)."""
        return sum((e.get("payload") or {}).get("turns", 1) for e in self.events(key, "human_direct_message"))

    def notices(self, watcher: str = WATCHER) -> list[dict[str, Any]]:
        return self.gw.peek_system_events(watcher)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    (claude / "projects").mkdir(parents=True)
    (codex / "sessions").mkdir(parents=True)
    return claude, codex


@pytest.fixture
def harness(tmp_path: Path, roots: tuple[Path, Path]) -> Iterator[Harness]:
    h = Harness(f"sqlite:///{tmp_path}/state.db", ManualClock(), *roots)
    yield h
    h.close()


@pytest.fixture
def any_harness(store_url: str, roots: tuple[Path, Path]) -> Iterator[Harness]:
    """The harness on every store backend (SQLite, and PostgreSQL when the server is there)."""
    h = Harness(store_url, ManualClock(), *roots)
    yield h
    h.close()


class HangingServer:
    """Accepts connections and never answers: a node that hangs."""

    def __init__(self) -> None:
        self.sock = listening_socket(backlog=16)
        self.port = port_of(self.sock)
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                continue

    def __enter__(self) -> HangingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()


def done_at(marker: dict[str, Any]) -> int | None:
    """A local-file marker's offset when it is not inside an oversized row (its file identity aside)."""
    return None if "row" in marker else marker.get("offset")
