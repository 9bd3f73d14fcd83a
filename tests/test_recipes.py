"""Framework recipes under examples/, run against the real framework package (the ``recipes`` extra) with
the framework's own fake model: no network, no model calls."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sessionwatch import Gateway
from sessionwatch.notices import notice_text

ROOT = Path(__file__).resolve().parents[1]
MANAGER = "agent:main:main"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_langgraph_recipe_runs_as_a_script() -> None:
    pytest.importorskip("langgraph")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_manager.py")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "[system] System: [" in out.stdout and '"kind": "human_direct_message"' in out.stdout
    assert out.stdout.rstrip().endswith("[ai] Reconciled: switching to tenacity.")


def test_langgraph_manager_reconciles_before_the_model_acts_and_hears_each_notice_once(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    recipe = _load("langgraph_manager")
    with Gateway.open(f"sqlite:///{tmp_path}/state.db") as gw:
        gw.put_session(MANAGER)
        spawned = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)
        child, version = spawned["sessionKey"], spawned["stateVersion"]
        model = GenericFakeChatModel(messages=iter([AIMessage("first"), AIMessage("second"), AIMessage("third")]))
        graph = recipe.build(gw, MANAGER, model)

        quiet = graph.invoke({"messages": [("user", "status?")]})["messages"]
        assert [m.type for m in quiet] == ["human", "ai"]  # nothing pending: nothing added

        gw.inbound(child, "a person steps in", channel="webchat")
        turn = graph.invoke({"messages": [("user", "next?")]})["messages"]
        assert [m.type for m in turn] == ["human", "system", "ai"]  # the model saw the notice first
        notice, *delta = turn[1].content.splitlines()
        assert notice.startswith("System: [") and notice.endswith(notice_text(child, version))
        assert f"Session {child} " in delta[0] and '"kind": "human_direct_message"' in turn[1].content
        assert gw.peek_system_events(MANAGER) == []  # delivered with this turn
        again = graph.invoke({"messages": [("user", "and now?")]})["messages"]
        assert [m.type for m in again] == ["human", "ai"]  # told once


@pytest.mark.slow
def test_openai_agents_recipe_runs_as_a_script() -> None:
    pytest.importorskip("agents")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_manager.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("System: [") and '"kind": "human_direct_message"' in out.stdout
    assert out.stdout.rstrip().endswith("Reconciled: switching to tenacity.")


def test_openai_agents_filter_puts_notice_and_delta_before_the_model_acts_once(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message

    recipe = _load("openai_agents_manager")
    with Gateway.open(f"sqlite:///{tmp_path}/state.db") as gw:
        gw.put_session(MANAGER)
        spawned = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)
        child, version = spawned["sessionKey"], spawned["stateVersion"]
        model = ScriptedModel([[assistant_message(text)] for text in ("first", "second", "third")])
        agent = Agent(name="manager", model=model)
        config = RunConfig(call_model_input_filter=recipe.notices_filter(gw, MANAGER), tracing_disabled=True)

        assert Runner.run_sync(agent, "status?", run_config=config).final_output == "first"
        assert [item["role"] for item in model.calls[0].input] == ["user"]  # nothing pending: untouched

        gw.inbound(child, "a person steps in", channel="webchat")
        assert Runner.run_sync(agent, "next?", run_config=config).final_output == "second"
        note, asked = model.calls[1].input
        assert note["role"] == "developer" and asked["content"] == "next?"
        notice, *delta = note["content"].splitlines()
        assert notice.startswith("System: [") and notice.endswith(notice_text(child, version))
        assert f"Session {child} " in delta[0] and '"kind": "human_direct_message"' in note["content"]

        Runner.run_sync(agent, "and now?", run_config=config)
        assert [item["role"] for item in model.calls[2].input] == ["user"]  # told once


class _ClaudeCodeStandIn:
    """Plays the Claude Code CLI's side of the Claude Agent SDK's stdin/stdout protocol, so the real SDK runs
    without the CLI or a model: it answers ``initialize``, runs the registered UserPromptSubmit hooks with the
    hook input Claude Code documents, and answers each prompt as a model would, by saying which context it got.
    The SDK ships no fake model; a custom ``Transport`` is its documented seam for this."""

    def __init__(self) -> None:
        import anyio

        self._anyio = anyio
        self._send, self._recv = anyio.create_memory_object_stream[dict](100)
        self._hooks: dict = {}
        self._answers: dict[str, tuple] = {}
        self.contexts: list[str | None] = []  # what the hooks added, per prompt

    async def connect(self) -> None: ...

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        self._send.close()  # stdin closed: the CLI exits, its stdout ends

    async def close(self) -> None:
        self._send.close()

    async def _read(self):
        async for message in self._recv:
            yield message

    def read_messages(self):
        return self._read()

    async def write(self, data: str) -> None:
        import json

        for line in data.splitlines():
            msg = json.loads(line)
            if msg["type"] == "control_request" and msg["request"]["subtype"] == "initialize":
                self._hooks = msg["request"].get("hooks") or {}
                await self._reply(msg["request_id"], {})
            elif msg["type"] == "control_response":
                done, box = self._answers.pop(msg["response"]["request_id"])
                box.append(msg["response"])
                done.set()
            elif msg["type"] == "user":
                await self._turn(msg["message"]["content"])

    async def _reply(self, request_id: str, body: dict) -> None:
        await self._send.send(
            {"type": "control_response", "response": {"subtype": "success", "request_id": request_id, "response": body}}
        )

    async def _turn(self, prompt: str) -> None:
        added: list[str] = []
        for matcher in self._hooks.get("UserPromptSubmit", []):
            for callback_id in matcher["hookCallbackIds"]:
                done, box = self._anyio.Event(), []
                request_id = f"hook-{len(self.contexts)}-{callback_id}"
                self._answers[request_id] = (done, box)
                await self._send.send(
                    {
                        "type": "control_request",
                        "request_id": request_id,
                        "request": {
                            "subtype": "hook_callback",
                            "callback_id": callback_id,
                            "tool_use_id": None,
                            "input": {
                                "session_id": "s-1",
                                "transcript_path": "/tmp/s-1.jsonl",
                                "cwd": "/tmp",
                                "permission_mode": "default",
                                "hook_event_name": "UserPromptSubmit",
                                "prompt": prompt,
                            },
                        },
                    }
                )
                await done.wait()
                assert box[0]["subtype"] == "success", box[0]
                context = box[0]["response"].get("hookSpecificOutput", {}).get("additionalContext")
                if context:
                    added.append(context)
        self.contexts.append("\n".join(added) or None)
        reply = f"Got {len(added)} context block(s) before '{prompt}'."
        await self._send.send(
            {
                "type": "assistant",
                "session_id": "s-1",
                "parent_tool_use_id": None,
                "message": {"role": "assistant", "model": "stand-in", "content": [{"type": "text", "text": reply}]},
            }
        )
        await self._send.send(
            {
                "type": "result",
                "subtype": "success",
                "duration_ms": 1,
                "duration_api_ms": 0,
                "is_error": False,
                "num_turns": 1,
                "session_id": "s-1",
                "result": reply,
                "total_cost_usd": 0,
                "usage": {},
            }
        )


def test_claude_agent_sdk_hook_adds_notice_and_delta_to_the_prompt_once(tmp_path: Path) -> None:
    pytest.importorskip("claude_agent_sdk")
    import anyio
    from claude_agent_sdk import ResultMessage

    recipe = _load("claude_agent_manager")
    with Gateway.open(f"sqlite:///{tmp_path}/state.db") as gw:
        gw.put_session(MANAGER)
        spawned = gw.call_tool("sessions_spawn", {"label": "kid"}, caller=MANAGER)
        child, version = spawned["sessionKey"], spawned["stateVersion"]

        def ask(prompt: str) -> tuple[str | None, str]:
            cli = _ClaudeCodeStandIn()
            messages = anyio.run(recipe.ask, gw, MANAGER, prompt, cli)
            (result,) = [m for m in messages if isinstance(m, ResultMessage)]
            return cli.contexts[0], result.result

        assert ask("status?") == (None, "Got 0 context block(s) before 'status?'.")  # nothing pending

        gw.inbound(child, "a person steps in", channel="webchat")
        context, answer = ask("next?")
        assert answer == "Got 1 context block(s) before 'next?'."
        assert context is not None
        notice, *delta = context.splitlines()
        assert notice.startswith("System: [") and notice.endswith(notice_text(child, version))
        assert f"Session {child} " in delta[0] and '"kind": "human_direct_message"' in context

        assert ask("and now?")[0] is None  # told once
