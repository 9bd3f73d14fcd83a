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
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_manager.py")], capture_output=True,
                         text=True, timeout=120)
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


def test_openai_agents_recipe_runs_as_a_script() -> None:
    pytest.importorskip("agents")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "openai_agents_manager.py")],
                         capture_output=True, text=True, timeout=120)
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
