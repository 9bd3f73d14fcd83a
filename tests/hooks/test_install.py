"""install/uninstall against real config files that already hold a person's own hooks and servers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from tests.support.commands import SESSIONWATCH

USER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": 'echo "branch: $(git branch --show-current)"'}]}
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/guard.sh", "timeout": 5}]}
        ],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
    },
}
USER_MCP = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
        }
    }
}
CODEX_CONFIG = """# my Codex settings
model = "gpt-5.3-codex"

[features]
hooks = true

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]  # the team's docs server
"""
CODEX_HOOKS = {
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "python3 .codex/hooks/stop.py"}]}],
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "./scan-secrets.sh", "statusMessage": "Scanning"}]}
        ],
    }
}


def sw(tmp: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp / "home"), "XDG_STATE_HOME": str(tmp / "state")}
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY"):
        env.pop(name, None)
    head = [*SESSIONWATCH, *(["--store", store] if store else [])]
    return subprocess.run([*head, *args], capture_output=True, text=True, env=env, timeout=60)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))


def ours(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"].get(event, []) for h in g["hooks"] if " hook " in h["command"]]


def test_claude_code_project_install_merges_is_idempotent_and_uninstall_restores(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    settings, mcp = project / ".claude" / "settings.json", project / ".mcp.json"
    write_json(settings, USER_SETTINGS)
    write_json(mcp, USER_MCP)
    original = settings.read_text()

    res = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", "agent:main:main")
    assert res.returncode == 0, res.stderr
    assert "settings.json" in res.stdout and "SessionStart" in res.stdout and "backup" in res.stdout
    now = json.loads(settings.read_text())
    assert now["permissions"] == USER_SETTINGS["permissions"]
    for event in ("UserPromptSubmit", "PreToolUse", "PostToolUse"):  # the person's own hooks are all there
        for group in USER_SETTINGS["hooks"][event]:
            assert group in now["hooks"][event]
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        cmds = ours(now, event)
        assert len(cmds) == 1 and cmds[0].endswith("hook claude-code --session agent:main:main")
    assert Path(str(settings) + ".sessionwatch-backup").read_text() == original
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["github"] == USER_MCP["mcpServers"]["github"]
    assert servers["sessionwatch"]["args"] == ["mcp", "--session", "agent:main:main"]

    # the written hook command really runs as a hook: it answers at once, exit 0
    cmd = shlex.split(ours(now, "UserPromptSubmit")[0])
    payload = {
        "session_id": "abc123",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hi",
    }
    ran = subprocess.run(
        cmd,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert (ran.returncode, ran.stdout) == (0, "")

    before = (settings.read_text(), mcp.read_text())
    again = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", "agent:main:main")
    assert again.returncode == 0 and "Nothing changed." in again.stdout
    assert (settings.read_text(), mcp.read_text()) == before

    other = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", "agent:ops:main")
    assert other.returncode == 0, other.stderr
    now = json.loads(settings.read_text())
    assert [c.split()[-1] for c in ours(now, "UserPromptSubmit")] == ["agent:ops:main"]  # updated, not doubled

    out = sw(tmp_path, "uninstall", "claude-code", "--dir", str(project), "--json")
    assert out.returncode == 0, out.stderr
    assert {c["action"] for c in json.loads(out.stdout)["changes"]} == {"updated"}
    assert json.loads(settings.read_text()) == USER_SETTINGS
    assert json.loads(mcp.read_text()) == USER_MCP
    assert "Nothing changed." in sw(tmp_path, "uninstall", "claude-code", "--dir", str(project)).stdout


def test_claude_code_user_install_keeps_the_rest_of_claude_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    state = {
        "numStartups": 12,
        "projects": {"/home/dev/acme-api": {"allowedTools": []}},
        "mcpServers": USER_MCP["mcpServers"],
    }
    write_json(home / ".claude.json", state)
    res = sw(
        tmp_path,
        "install",
        "claude-code",
        "--user",
        "--session",
        "agent:main:main",
        store=f"sqlite:///{tmp_path / 'sw.db'}",
    )
    assert res.returncode == 0, res.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert "--store" in ours(settings, "SessionStart")[0]  # the store given at install is the hook's too
    claude = json.loads((home / ".claude.json").read_text())
    assert claude["numStartups"] == 12 and set(claude["mcpServers"]) == {"github", "sessionwatch"}
    assert sw(tmp_path, "uninstall", "claude-code", "--user").returncode == 0
    assert json.loads((home / ".claude.json").read_text()) == state
    assert not (home / ".claude" / "settings.json").exists()  # it held only ours: removed (a backup stays)


def test_codex_project_install_edits_toml_and_hooks_json_and_uninstall_restores(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    config, hooks = project / ".codex" / "config.toml", project / ".codex" / "hooks.json"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_CONFIG)
    write_json(hooks, CODEX_HOOKS)
    res = sw(tmp_path, "install", "codex", "--dir", str(project), "--session", "agent:main:main")
    assert res.returncode == 0, res.stderr
    assert "/hooks" in res.stdout  # tells the person to trust the new hooks
    text = config.read_text()
    assert "# my Codex settings" in text and "# the team's docs server" in text
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"]}
    assert parsed["mcp_servers"]["sessionwatch"]["args"] == ["mcp", "--session", "agent:main:main"]
    now = json.loads(hooks.read_text())
    assert now["hooks"]["Stop"] == CODEX_HOOKS["hooks"]["Stop"]
    assert CODEX_HOOKS["hooks"]["UserPromptSubmit"][0] in now["hooks"]["UserPromptSubmit"]
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        assert len(ours(now, event)) == 1 and ours(now, event)[0].endswith("hook codex --session agent:main:main")
    assert (
        "Nothing changed."
        in sw(tmp_path, "install", "codex", "--dir", str(project), "--session", "agent:main:main").stdout
    )
    assert sw(tmp_path, "uninstall", "codex", "--dir", str(project)).returncode == 0
    assert config.read_text() == CODEX_CONFIG
    assert json.loads(hooks.read_text()) == CODEX_HOOKS


def test_a_foreign_server_of_the_same_name_and_broken_files_are_left_alone(tmp_path: Path) -> None:
    project = tmp_path / "p"
    mine = {"mcpServers": {"sessionwatch": {"command": "docker", "args": ["run", "acme/sessionwatch-proxy"]}}}
    write_json(project / ".mcp.json", mine)
    res = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", "agent:main:main")
    assert res.returncode == 0 and "left as it is" in res.stdout
    assert json.loads((project / ".mcp.json").read_text()) == mine
    assert sw(tmp_path, "uninstall", "claude-code", "--dir", str(project)).returncode == 0
    assert json.loads((project / ".mcp.json").read_text()) == mine  # not ours: never removed

    broken = tmp_path / "b" / ".claude" / "settings.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{ not json")
    res = sw(tmp_path, "install", "claude-code", "--dir", str(tmp_path / "b"))
    assert res.returncode == 2 and "not valid JSON" in res.stderr
    assert broken.read_text() == "{ not json"


def test_without_a_session_only_the_hooks_are_installed(tmp_path: Path) -> None:
    res = sw(tmp_path, "install", "claude-code", "--dir", str(tmp_path / "q"))
    assert res.returncode == 0, res.stderr
    assert "give --session KEY" in res.stdout
    assert not (tmp_path / "q" / ".mcp.json").exists()
    settings = json.loads((tmp_path / "q" / ".claude" / "settings.json").read_text())
    assert ours(settings, "UserPromptSubmit")[0].endswith("hook claude-code")
