"""The tools Pi's extension registers are the engine's six, as the MCP server publishes them.

Pi has no MCP client: ``sessionwatch install pi`` writes the tools into the extension (names, titles,
descriptions and input schemas, from ``hosts/pi/tools.json``, package data), and each call runs
``sessionwatch tool NAME --host pi``. A room cannot import the engine, so the file is kept here to the
engine's tools: when a tool changes, ``python -m tests.hosts.test_pi_tools`` writes it again.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from sessionwatch.engine.tools import TOOLS
from sessionwatch.hosts.pi import install as pi
from tests.hooks.test_install import sw

FILE = Path(str(resources.files("sessionwatch.hosts.pi").joinpath("tools.json")))


def specs() -> list[dict[str, Any]]:
    return [
        {"name": t.name, "label": t.title, "description": t.description, "parameters": t.input_schema}
        for t in TOOLS.values()
    ]


def render() -> str:
    return json.dumps(specs(), indent=2, ensure_ascii=False) + "\n"


def test_the_extensions_tools_are_the_engines() -> None:
    assert FILE.read_text(encoding="utf-8") == render(), (
        "hosts/pi/tools.json is stale: python -m tests.hosts.test_pi_tools"
    )


def test_the_installed_extension_registers_them_and_runs_each_through_the_tool_command() -> None:
    command = ["sessionwatch", "--gateway", "http://127.0.0.1:7878", "hook", "pi", "--agent", "acme"]
    text = pi.render(command)
    line = next(x for x in text.splitlines() if x.startswith("const TOOLS: ToolSpec[] = "))
    assert json.loads(line.split(" = ", 1)[1].rstrip(";")) == specs()
    assert pi.command_of(text) == [
        "sessionwatch",
        "--gateway",
        "http://127.0.0.1:7878",
        "hook",
        "pi",
        "--agent",
        "acme",
    ]


def test_doctor_says_when_the_extension_or_the_command_lacks_the_tools(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    assert sw(tmp_path, "install", "pi", "--dir", str(project)).returncode == 0

    def tools_check() -> dict[str, Any]:
        out = sw(tmp_path, "doctor", "pi", "--dir", str(project), "--json")
        (scope,) = [s for s in json.loads(out.stdout)["hosts"][0]["scopes"] if s["scope"] == "project"]
        return dict(next(c for c in scope["checks"] if c["check"] == "tools"))

    ok = tools_check()
    assert ok["ok"] is True and "6 tools registered" in ok["detail"], ok
    extension = project / ".pi" / "extensions" / "sessionwatch.ts"
    old = [x for x in extension.read_text().splitlines(keepends=True) if not x.startswith("const TOOLS: ToolSpec")]
    extension.write_text("".join(old))  # as an extension without tools is
    stale = tools_check()
    assert stale["ok"] is False and "registers no tools" in stale["detail"], stale
    assert stale["fix"].startswith("sessionwatch install pi --project"), stale

    older = tmp_path / "older" / "sessionwatch"  # a sessionwatch from before the tool command
    older.parent.mkdir()
    older.write_text("#!/bin/sh\nexit 2\n")
    older.chmod(0o755)
    text = pi.render([str(older), "hook", "pi"])
    extension.write_text(text)
    missing = tools_check()
    assert missing["ok"] is False and "has no `tool` command" in missing["detail"], missing


if __name__ == "__main__":
    FILE.write_text(render(), encoding="utf-8")
    print(f"wrote {FILE}")
