"""Fake model servers for the real hosts: Claude Code (Anthropic Messages, SSE), Codex (OpenAI
Responses, SSE), OpenCode and Pi (OpenAI chat completions, SSE: wire ``"chat"``), on loopback.

Each server records every request body (what the model would have received: the system text, the
messages or input items, the tools) and answers from a script: a list of replies, one per model request,
each a text or a tool call. When the script runs out it answers a plain text, so a host never hangs on
an unscripted request (compaction, titles, a retry).

    with FakeModel("anthropic") as model:
        model.script(Reply.tool("mcp__sessionwatch__session_status", {"sessionKey": k}), Reply.text("done"))
        ... run the host with model.url ...
        model.requests   # every request body, in order
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Wire = Literal["anthropic", "openai", "chat"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text, or a tool call (name, input) the host is to run. ``before`` runs when
    the request arrives, before the answer goes out: what "meanwhile, someone else acted" looks like."""

    text: str = ""
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    before: Callable[[], None] | None = None
    status: int = 200  # anything else: the request fails with this HTTP status (``text`` the error's message)

    @staticmethod
    def say(text: str, *, before: Callable[[], None] | None = None) -> Reply:
        return Reply(text=text, before=before)

    @staticmethod
    def call(tool: str, arguments: dict[str, Any] | None = None, *, before: Callable[[], None] | None = None) -> Reply:
        return Reply(tool=tool, input=dict(arguments or {}), before=before)

    @staticmethod
    def fail(
        status: int = 400,
        message: str = "the fake model refuses this request",
        *,
        before: Callable[[], None] | None = None,
    ) -> Reply:
        """The request fails: an HTTP error in the wire format's error shape (400 is not retried;
        ``Reply.fail(400, "prompt is too long")`` is what a host takes for a context overflow)."""
        return Reply(text=message, status=status, before=before)


class FakeModel:
    """A scriptable model server speaking one host's wire format. Thread-safe; a context manager."""

    def __init__(self, wire: Wire, default: str = "ok") -> None:
        self.wire = wire
        self.default = default
        self.requests: list[dict[str, Any]] = []  # model requests only (not count_tokens)
        # A host's own calls beside the conversation (Claude Code forces a tool for them, on a slow run for
        # instance; Codex asks for a thread title beside a TUI's turn): answered without taking a scripted
        # reply, and not in ``requests``.
        self.side_requests: list[dict[str, Any]] = []
        self.paths: list[str] = []  # every request path, in order
        self._script: list[Reply] = []
        # Before the script: a function of the request (for hosts that run several agents at once, whose
        # requests arrive in no fixed order); None from it means "the script's next reply".
        self.respond: Callable[[dict[str, Any]], Reply | None] | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"fake-{wire}", daemon=True)

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *replies: Reply) -> None:
        """Replies for the next model requests, in order (appended to what is left)."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, request: dict[str, Any]) -> Reply:
        reply = self.respond(request) if self.respond is not None else None
        if reply is None:
            with self._lock:
                reply = self._script.pop(0) if self._script else Reply.say(self.default)
        if reply.before is not None:
            reply.before()
        return reply

    def _record(self, path: str, body: dict[str, Any] | None) -> None:
        with self._lock:
            self.paths.append(path)
            if body is not None:
                self.requests.append(body)

    # -- what the model saw --------------------------------------------------------------------------
    def texts(self, request: dict[str, Any]) -> list[str]:
        """Every text in one request's input (system, messages/input items), in order."""
        out: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, list):
                for item in node:
                    walk(item)
            elif isinstance(node, dict):
                for k in ("text", "content", "output", "instructions"):
                    if k in node:
                        walk(node[k])

        if self.wire == "anthropic":
            walk(request.get("system"))
            walk(request.get("messages"))
        elif self.wire == "chat":
            walk(request.get("messages"))
        else:
            walk(request.get("instructions"))
            walk(request.get("input"))
        return out

    def seen(self, needle: str) -> list[int]:
        """Indexes of the requests whose input contains ``needle``."""
        with self._lock:
            reqs = list(self.requests)
        return [i for i, r in enumerate(reqs) if any(needle in t for t in self.texts(r))]

    def tool_names(self, request: dict[str, Any]) -> list[str]:
        names = []
        for t in request.get("tools") or []:
            if self.wire == "openai" and t.get("type") == "namespace":
                names += [f"{t.get('name')}__{x.get('name')}" for x in t.get("tools") or []]
            elif self.wire == "chat":
                names.append(str((t.get("function") or {}).get("name")))
            else:
                names.append(str(t.get("name")))
        return names

    def tool_results(self, request: dict[str, Any]) -> list[str]:
        """The texts of the tool results in one request (what the last tool calls answered)."""
        out: list[str] = []
        if self.wire == "anthropic":
            for m in request.get("messages") or []:
                for block in m.get("content") if isinstance(m.get("content"), list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        content = block.get("content")
                        if isinstance(content, str):
                            out.append(content)
                        else:
                            out += [c.get("text", "") for c in content or [] if isinstance(c, dict)]
        elif self.wire == "chat":
            for m in request.get("messages") or []:
                if isinstance(m, dict) and m.get("role") == "tool":
                    content = m.get("content")
                    if isinstance(content, str):
                        out.append(content)
                    else:
                        out += [c.get("text", "") for c in content or [] if isinstance(c, dict)]
        else:
            for item in request.get("input") or []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    o = item.get("output")
                    out.append(o if isinstance(o, str) else json.dumps(o))
        return out

    # -- the HTTP side ---------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _body(self) -> dict[str, Any] | None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    value = json.loads(raw) if raw else None
                except ValueError:
                    return None
                return value if isinstance(value, dict) else None

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                model._record(self.path, None)
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not here"}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                body = self._body()
                if path.endswith("/count_tokens"):
                    model._record(path, None)
                    self._json(200, {"input_tokens": 100})
                    return
                if path.endswith("/v1/messages") and body is not None:
                    if _side_call(body):  # not the agent's conversation: answered, kept apart
                        with model._lock:
                            model.side_requests.append(body)
                        self._sse(_anthropic_events(Reply.say("{}"), body))
                        return
                    model._record(path, body)
                    reply = model._next(body)
                    if reply.status != 200:
                        error = {"type": "invalid_request_error", "message": reply.text}
                        self._json(reply.status, {"type": "error", "error": error})
                        return
                    self._sse(_anthropic_events(reply, body))
                    return
                if path.endswith("/chat/completions") and body is not None:
                    model._record(path, body)
                    reply = model._next(body)
                    if reply.status != 200:
                        self._json(reply.status, {"error": {"message": reply.text, "type": "invalid_request_error"}})
                        return
                    self._sse_data(_chat_chunks(reply))
                    return
                if path.endswith("/responses") and body is not None:
                    if _codex_title_call(body):  # not the agent's conversation: answered, kept apart
                        with model._lock:
                            model.side_requests.append(body)
                        self._sse(_openai_events(Reply.say("A title")))
                        return
                    model._record(path, body)
                    reply = model._next(body)
                    if reply.status != 200:
                        self._json(reply.status, {"error": {"message": reply.text, "type": "invalid_request_error"}})
                        return
                    self._sse(_openai_events(reply))
                    return
                model._record(path, None)
                self._json(404, {"error": {"message": f"no route {path}"}})

            def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                chunks = b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(chunks)))
                self.end_headers()
                self.wfile.write(chunks)

            def _sse_data(self, chunks: list[dict[str, Any]]) -> None:
                """Chat completions stream bare ``data:`` lines and end with ``data: [DONE]``."""
                body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def _side_call(request: dict[str, Any]) -> bool:
    """A Claude Code request that is not the agent's turn: a structured call (one forced tool,
    ``tool_choice: {"type": "tool"}``, a schema-only output, or tools none of which an agent has)."""
    choice = request.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return True
    output = request.get("output_format") or request.get("output_config")
    if isinstance(output, dict) and bool(output.get("schema") or output.get("format")):
        return True
    # tools, but none of an agent's (every agent, subagents too, can read files): a schema-only call
    names = {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict)}
    return bool(names) and not names & {"Read", "Bash"}


def _codex_title_call(request: dict[str, Any]) -> bool:
    """Codex's request for a thread's title ("Generate a concise ..."), sent beside a TUI's turn and, on a
    busy machine, sometimes before it."""
    return "Generate a concise" in json.dumps(request)


def _chat_chunks(reply: Reply) -> list[dict[str, Any]]:
    """One reply as OpenAI chat-completion chunks: a text, or one tool call, then the finish and usage."""
    cid = "chatcmpl-" + uuid.uuid4().hex[:20]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.tool is None:
        out.append(chunk({"content": reply.text or "ok"}))
        finish = "stop"
    else:
        if reply.text:
            out.append(chunk({"content": reply.text}))
        call = {
            "index": 0,
            "id": "call_" + uuid.uuid4().hex[:20],
            "type": "function",
            "function": {"name": reply.tool, "arguments": json.dumps(reply.input)},
        }
        out.append(chunk({"tool_calls": [call]}))
        finish = "tool_calls"
    out.append(chunk({}, finish))
    out.append(
        {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }
    )
    return out


def _anthropic_events(reply: Reply, request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    mid = "msg_" + uuid.uuid4().hex[:20]
    usage = {"input_tokens": 100, "output_tokens": 10}
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model", "fake-model"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0
    if reply.text or reply.tool is None:
        text = reply.text or "ok"
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    if reply.tool is not None:
        tid = "toolu_" + uuid.uuid4().hex[:20]
        block = {"type": "tool_use", "id": tid, "name": reply.tool, "input": {}}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(reply.input)},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    stop = "tool_use" if reply.tool is not None else "end_turn"
    events += [
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _openai_events(reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    rid = "resp_" + uuid.uuid4().hex[:20]
    seq = iter(range(1_000_000))
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {"id": rid, "object": "response", "status": "in_progress", "output": []},
            },
        ),
    ]
    output: list[dict[str, Any]] = []
    index = 0
    if reply.text or reply.tool is None:
        text = reply.text or "ok"
        mid = "msg_" + uuid.uuid4().hex[:20]
        item = {
            "type": "message",
            "id": mid,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "content_index": 0,
                    "item_id": mid,
                    "delta": text,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": item,
                },
            ),
        ]
        output.append(item)
        index += 1
    if reply.tool is not None:
        # a namespaced tool (MCP tools, Codex's multi_agent_v1 tools) is named "<namespace>__<name>"
        namespace, _, name = reply.tool.rpartition("__")
        item = {
            "type": "function_call",
            "id": "fc_" + uuid.uuid4().hex[:20],
            "call_id": "call_" + uuid.uuid4().hex[:20],
            "name": name,
            "arguments": json.dumps(reply.input),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": item,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": item,
                },
            ),
        ]
        output.append(item)
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {"id": rid, "object": "response", "status": "completed", "output": output, "usage": usage},
            },
        )
    )
    return events
