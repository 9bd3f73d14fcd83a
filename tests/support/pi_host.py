"""Pi in a scratch home against a fake chat-completions server: print mode, RPC mode and its TUI.

``PiHome`` is the scratch ``HOME`` plus ``PI_CODING_AGENT_DIR`` with a ``models.json`` naming the fake
server; ``PiRpc`` drives ``pi --mode rpc`` (one JSON command a line, events back) for what only a
session's own commands can write into its file: ``!cmd`` runs, compactions, custom entries and branches.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .hosts import HostHome, Run

# An extension for the reader's fixtures: commands that write what a person's /tree and an extension's
# state write (a custom entry, a custom message, a branch back to an earlier entry).
FIXTURE_EXTENSION = """
export default function (pi: any) {
  pi.registerCommand("fixture-mark", {
    description: "a custom entry and a custom message",
    handler: async (_args: string, ctx: any) => {
      pi.appendEntry("fixture", { n: 1 });
      pi.sendMessage({ customType: "fixture", content: "an extension's note", display: true });
    },
  });
  pi.registerCommand("fixture-back", {
    description: "move the leaf back to the first assistant reply",
    handler: async (_args: string, ctx: any) => {
      const replies = ctx.sessionManager.getEntries().filter((e: any) => e.type === "message");
      const first = replies.find((e: any) => e.message.role === "assistant");
      await ctx.navigateTree(first.id, { summarize: false });
    },
  });
}
"""


class PiHome(HostHome):
    name = "pi"

    def __init__(self, root: Path, binary: Path, model_url: str) -> None:
        super().__init__(root, binary, model_url)
        self.agent = root / "agent"
        self.agent.mkdir(exist_ok=True)
        models = {
            "providers": {
                "fake": {
                    "baseUrl": f"{model_url}/v1",
                    "api": "openai-completions",
                    "apiKey": "fake-key",
                    "models": [{"id": "fake-model"}],
                }
            }
        }
        (self.agent / "models.json").write_text(json.dumps(models))

    def _host_env(self) -> dict[str, str]:
        return {
            "PI_CODING_AGENT_DIR": str(self.agent),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
            "PI_SKIP_VERSION_CHECK": "1",
        }

    def prompt(self, text: str, *more: str, timeout: float = 180.0) -> Run:
        return self.run("--provider", "fake", "--model", "fake-model", *more, "-p", text, timeout=timeout)

    def tui_args(self, *more: str) -> tuple[str, ...]:
        return ("--provider", "fake", "--model", "fake-model", *more)

    def session_files(self) -> list[Path]:
        """The session files whose header line is written (a running TUI creates the file first)."""
        return sorted(p for p in (self.agent / "sessions").rglob("*.jsonl") if b"\n" in _head(p))


class PiRpc:
    """``pi --mode rpc`` in the project folder; ``send`` a command, ``wait`` for an event."""

    def __init__(self, h: PiHome, *more: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(h.binary), "--mode", "rpc", "--provider", "fake", "--model", "fake-model", *more],
            cwd=h.project,
            env={**h.env(), **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def wait(self, kind: str, after: int, timeout: float = 60.0, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for event in self.events[after:]:
                    if event.get("type") == kind and all(event.get(k) == v for k, v in match.items()):
                        return event
            time.sleep(0.05)
        raise AssertionError(f"no {kind} {match} from pi --mode rpc within {timeout} s: {self.events[after:][-5:]}")

    def mark(self) -> int:
        with self._lock:
            return len(self.events)

    def prompt(self, text: str) -> None:
        at = self.mark()
        self.send({"type": "prompt", "message": text})
        self.wait("agent_end", at)

    def slash(self, text: str) -> None:
        """An extension's /command: answered without a turn."""
        self.command({"type": "prompt", "message": text}, "prompt")
        time.sleep(0.2)  # what the command appends is written as it runs

    def command(self, command: dict[str, Any], name: str) -> dict[str, Any]:
        at = self.mark()
        self.send(command)
        return self.wait("response", at, command=name)

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> PiRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def clean_env() -> dict[str, str]:
    """This process's environment without sessionwatch's own variables (a test's hosts start clean)."""
    env = dict(os.environ)
    for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_TOKEN"):
        env.pop(name, None)
    return env


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(65536)
    except OSError:
        return b""
