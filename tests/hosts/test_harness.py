"""The real hosts run headless against the suite's fake model servers: a prompt reaches the model, the
scripted answer reaches the person, and a scripted tool call is run by the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_model import FakeModel, Reply, Wire
from tests.support.hosts import host_home

pytestmark = pytest.mark.hosts

WIRE: dict[str, Wire] = {"claude-code": "anthropic", "codex": "openai"}


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_prompt_reaches_the_fake_model_and_its_answer_comes_back(host: str, tmp_path: Path) -> None:
    with FakeModel(WIRE[host]) as model, host_home(host, tmp_path, model.url) as h:
        model.script(Reply.say("the answer is 42"))
        run = h.prompt("what is the answer?")
        assert run.returncode == 0, run.stderr[-2000:]
        assert "the answer is 42" in run.stdout
        assert model.seen("what is the answer?") == [0]


@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_a_scripted_tool_call_is_run_and_its_result_reaches_the_model(host: str, tmp_path: Path) -> None:
    with FakeModel(WIRE[host]) as model, host_home(host, tmp_path, model.url) as h:
        (h.project / "notes.txt").write_text("marker-7781\n")
        if host == "claude-code":
            model.script(Reply.call("Read", {"file_path": str(h.project / "notes.txt")}), Reply.say("read it"))
        else:
            model.script(Reply.call("exec_command", {"cmd": "cat notes.txt"}), Reply.say("read it"))
        run = h.prompt("read notes.txt")
        assert run.returncode == 0, run.stderr[-2000:]
        results = [r for req in model.requests for r in model.tool_results(req)]
        assert any("marker-7781" in r for r in results), results
