"""Write transcripts the way the CLIs do: one compact JSON object per line, appended with one write.

Claude Code appends ``JSON.stringify(entry) + "\\n"`` with a synchronous append (non-ASCII characters
raw, control characters escaped) to ``<root>/projects/<escaped cwd>/<session id>.jsonl``. Codex CLI
appends rollout lines ``{"timestamp", "type", "payload"}`` to
``<root>/sessions/YYYY/MM/DD/rollout-<timestamp>-<thread id>.jsonl``, writing a user prompt twice: as a
``response_item`` (what the model saw) and as an ``event_msg`` (what the person typed).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BASE_TIME = datetime(2027, 1, 15, 7, 0, 0, tzinfo=UTC)


def js_line(entry: dict[str, Any]) -> bytes:
    """What JSON.stringify produces: compact, non-ASCII raw."""
    return (json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


class Transcript:
    path: Path

    def append_bytes(self, data: bytes) -> None:
        with open(self.path, "ab") as fh:  # one write, like appendFileSync
            fh.write(data)

    def size(self) -> int:
        return self.path.stat().st_size


class ClaudeTranscript(Transcript):
    def __init__(
        self, root: Path, cwd: str = "/home/dev/acme-api", session_id: str | None = None, version: str = "2.1.310"
    ) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.cwd = cwd
        self.version = version
        self.dir = Path(root) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"{self.session_id}.jsonl"
        self.path.touch()
        self.parent: str | None = None
        self.t = BASE_TIME

    def _tick(self) -> str:
        self.t += timedelta(seconds=1)
        return iso(self.t)

    def entry(
        self, type_: str, message: dict[str, Any] | None = None, *, line: bool = True, **extra: Any
    ) -> dict[str, Any]:
        uid = str(uuid.uuid4())
        e: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "main",
            "entrypoint": "cli",
            "type": type_,
        }
        if message is not None:
            e["message"] = message
        e["uuid"] = uid
        e["timestamp"] = self._tick()
        for k, v in extra.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        self.parent = uid
        return e

    def write(self, e: dict[str, Any]) -> dict[str, Any]:
        self.append_bytes(js_line(e))
        return e

    # -- rows --------------------------------------------------------------------------------------
    def prompt(self, text: Any, *, source: str | None = "typed", **extra: Any) -> dict[str, Any]:
        """A prompt as the CLI records it (promptSource typed/queued/sdk/system; None = older CLI)."""
        e = self.entry("user", {"role": "user", "content": text}, promptId=str(uuid.uuid4()), **extra)
        if source is not None:
            e["promptSource"] = source
            e["permissionMode"] = "default"
        return self.write(e)

    def blocks(self, blocks: list[dict[str, Any]], *, source: str | None = "typed") -> dict[str, Any]:
        return self.prompt(blocks, source=source)

    def assistant(self, text: str) -> dict[str, Any]:
        return self.write(
            self.entry(
                "assistant",
                {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6",
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 40},
                },
                requestId=f"req_{uuid.uuid4().hex[:24]}",
            )
        )

    def tool_use(self, name: str = "Read", args: dict[str, Any] | None = None) -> str:
        tid = f"toolu_{uuid.uuid4().hex[:24]}"
        self.write(
            self.entry(
                "assistant",
                {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-6",
                    "content": [{"type": "tool_use", "id": tid, "name": name, "input": args or {"file_path": "/x"}}],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            )
        )
        return tid

    def tool_result(self, content: str, tool_id: str | None = None, *, extra_text: str | None = None) -> dict:
        tid = tool_id or f"toolu_{uuid.uuid4().hex[:24]}"
        blocks: list[dict[str, Any]] = [{"tool_use_id": tid, "type": "tool_result", "content": content}]
        if extra_text is not None:
            blocks.append({"type": "text", "text": extra_text})
        return self.write(
            self.entry(
                "user",
                {"role": "user", "content": blocks},
                sourceToolAssistantUUID=self.parent,
                toolUseResult={"type": "text", "file": {"content": content}},
            )
        )

    def meta(self, text: str) -> dict[str, Any]:
        return self.write(self.entry("user", {"role": "user", "content": text}, isMeta=True))

    def sidechain(self, text: str) -> dict[str, Any]:
        return self.write(self.entry("user", {"role": "user", "content": text}, isSidechain=True, agentId="a1b2c3d4"))

    def compaction(self, summary: str) -> None:
        self.write(
            self.entry(
                "system",
                None,
                subtype="compact_boundary",
                content="Conversation compacted",
                logicalParentUuid=self.parent,
                level="info",
            )
        )
        self.write(
            self.entry(
                "user", {"role": "user", "content": summary}, isCompactSummary=True, isVisibleInTranscriptOnly=True
            )
        )

    def inter_session(self, text: str) -> dict[str, Any]:
        return self.prompt(f"[Inter-session message] from agent:main:main\n{text}", source=None)

    def reseed(self, history: str, nxt: str) -> dict[str, Any]:
        body = (
            "Continue this conversation using the OpenClaw transcript below as prior session history. "
            "Treat it as authoritative context.\n\n<conversation_history>\n"
            + history
            + "\n</conversation_history>\n\n<next_user_message>\n"
            + nxt
            + "\n</next_user_message>"
        )
        return self.prompt(body, source=None)

    def sidecar(self) -> None:
        """Rows without a uuid that the CLI also writes."""
        self.append_bytes(
            js_line(
                {"type": "last-prompt", "lastPrompt": "user", "leafUuid": self.parent, "sessionId": self.session_id}
            )
        )
        self.append_bytes(
            js_line(
                {
                    "type": "queue-operation",
                    "operation": "enqueue",
                    "timestamp": iso(self.t),
                    "sessionId": self.session_id,
                    "content": "user",
                }
            )
        )


class CodexRollout(Transcript):
    def __init__(
        self, root: Path, thread_id: str | None = None, when: datetime = BASE_TIME, source: str = "cli"
    ) -> None:
        self.thread_id = thread_id or str(uuid.uuid4())
        self.t = when
        folder = Path(root) / "sessions" / when.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rollout-{when.strftime('%Y-%m-%dT%H-%M-%S')}-{self.thread_id}.jsonl"
        self.turn = 0
        self.line(
            "session_meta",
            {
                "id": self.thread_id,
                "timestamp": iso(when),
                "cwd": "/home/dev/acme-api",
                "originator": "codex_cli_rs",
                "cli_version": "0.140.0",
                "instructions": None,
                "source": source,
                "model_provider": "openai",
                "git": {"branch": "main"},
            },
        )

    def line(self, type_: str, payload: dict[str, Any]) -> None:
        self.t += timedelta(milliseconds=500)
        self.append_bytes(js_line({"timestamp": iso(self.t), "type": type_, "payload": payload}))

    def turn_context(self) -> None:
        self.turn += 1
        self.line(
            "turn_context",
            {
                "cwd": "/home/dev/acme-api",
                "approval_policy": "on-request",
                "sandbox_policy": {"mode": "workspace-write"},
                "model": "gpt-5-codex",
            },
        )

    def environment(self) -> None:
        self.line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n  <cwd>/home/dev/acme-api</cwd>\n</environment_context>",
                    }
                ],
            },
        )

    def user_legacy(self, text: str, *, kind: str | None = None) -> None:
        """Legacy history: the protocol copy, then the display event (kind: older builds' tag)."""
        self.turn_context()
        self.line(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        )
        payload: dict[str, Any] = {"type": "user_message", "message": text, "images": []}
        if kind is not None:
            payload["kind"] = kind
        self.line("event_msg", payload)

    def user_paginated(self, *parts: str, image: bool = False) -> None:
        """Paginated history: an item_completed event carrying the UserMessage turn item."""
        self.turn_context()
        content: list[dict[str, Any]] = [{"type": "text", "text": p, "text_elements": []} for p in parts]
        if image:
            content.insert(1, {"type": "image", "image_url": "data:image/png;base64,AAAA"})
        self.line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": p} for p in parts]},
        )
        self.line(
            "event_msg",
            {
                "type": "item_completed",
                "thread_id": self.thread_id,
                "turn_id": f"turn-{self.turn}",
                "item": {"type": "UserMessage", "id": str(uuid.uuid4()), "content": content},
            },
        )

    def agent(self, text: str) -> None:
        self.line("event_msg", {"type": "agent_message", "message": text})
        self.line(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
        )
        self.line("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 10}}})

    def tool(self, output: str) -> None:
        call = f"call_{uuid.uuid4().hex[:12]}"
        self.line(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["ls"]}), "call_id": call},
        )
        self.line(
            "response_item", {"type": "function_call_output", "call_id": call, "output": json.dumps({"output": output})}
        )
