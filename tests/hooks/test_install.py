"""install/uninstall against real config files that already hold a person's own hooks and servers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from sessionwatch import Gateway
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


# the host finds `sessionwatch` on its PATH (the project scope writes the bare name); no codex here
BIN = str(Path(SESSIONWATCH[0]).parent) if len(SESSIONWATCH) == 1 else str(Path(sys.executable).parent)
PATH = os.pathsep.join([BIN, "/usr/bin", "/bin"])


def env_of(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(tmp / "home"), "XDG_STATE_HOME": str(tmp / "state"), "PATH": PATH}
    for name in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "SESSIONWATCH_STORE",
        "SESSIONWATCH_GATEWAY",
        "SESSIONWATCH_STATE_DIR",
    ):
        env.pop(name, None)
    return env


def sw(tmp: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    head = [*SESSIONWATCH, *(["--store", store] if store else [])]
    return subprocess.run([*head, *args], capture_output=True, text=True, env=env_of(tmp), timeout=120)


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4))


def ours(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"].get(event, []) for h in g["hooks"] if " hook " in h["command"]]


MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:researcher"


def test_claude_code_project_install_merges_is_idempotent_and_uninstall_restores(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    settings, mcp = project / ".claude" / "settings.json", project / ".mcp.json"
    write_json(settings, USER_SETTINGS)
    write_json(mcp, USER_MCP)
    before = files_under(project)

    res = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", MANAGER)
    assert res.returncode == 0, res.stderr
    assert "settings.json" in res.stdout and "SessionStart" in res.stdout
    now = json.loads(settings.read_text())
    assert now["permissions"]["allow"] == ["Bash(npm test)", "mcp__sessionwatch"]  # calls are permitted
    assert now["enabledMcpjsonServers"] == ["sessionwatch"]  # the TUI does not refuse the project's server
    for event in ("UserPromptSubmit", "PreToolUse", "PostToolUse"):  # the person's own hooks are all there
        for group in USER_SETTINGS["hooks"][event]:
            assert group in now["hooks"][event]
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        cmds = ours(now, event)
        # a committed file: no path of this machine, the command is found on PATH
        assert cmds == [f"sessionwatch hook claude-code --session {MANAGER}"]
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["github"] == USER_MCP["mcpServers"]["github"]
    assert servers["sessionwatch"] == {
        "command": "sessionwatch",
        "args": ["mcp", "--session", MANAGER],
        "alwaysLoad": True,  # the tools are in the first request, not deferred behind ToolSearch
    }
    assert str(tmp_path) not in settings.read_text() + mcp.read_text()
    # Claude Code ignores the committed file's permission rules until the workspace trust dialog was
    # accepted: this person's own file gets them too (no backup files in the project)
    assert set(files_under(project)) == {*before, ".claude/settings.local.json"}
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local == {"permissions": {"allow": ["mcp__sessionwatch"]}, "enabledMcpjsonServers": ["sessionwatch"]}

    # the written hook command really runs as a hook: it answers at once, exit 0
    payload = {
        "session_id": "abc123",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hi",
    }
    ran = subprocess.run(
        ours(now, "UserPromptSubmit")[0],
        shell=True,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env_of(tmp_path),
    )
    assert (ran.returncode, ran.stdout) == (0, "")

    installed = (settings.read_text(), mcp.read_text())
    again = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", MANAGER)
    assert again.returncode == 0 and "Nothing changed." in again.stdout
    assert (settings.read_text(), mcp.read_text()) == installed

    other = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", "agent:ops:main")
    assert other.returncode == 0, other.stderr
    now = json.loads(settings.read_text())
    assert [c.split()[-1] for c in ours(now, "UserPromptSubmit")] == ["agent:ops:main"]  # updated, not doubled

    out = sw(tmp_path, "uninstall", "claude-code", "--dir", str(project), "--json")
    assert out.returncode == 0, out.stderr
    actions = {Path(c["path"]).name: c["action"] for c in json.loads(out.stdout)["changes"]}
    assert actions == {"settings.json": "restored", ".mcp.json": "restored", "settings.local.json": "removed"}
    assert files_under(project) == before  # byte for byte, and nothing left behind
    assert "Nothing changed." in sw(tmp_path, "uninstall", "claude-code", "--dir", str(project)).stdout


def test_uninstall_restores_every_file_byte_for_byte_and_removes_what_install_created(tmp_path: Path) -> None:
    """Pre-existing files with other content, in each host's own layout (4-space JSON, commented TOML),
    and files that did not exist: after install and uninstall, the project and home are as before."""
    project, home = tmp_path / "repo", tmp_path / "home"
    write_json(project / ".claude" / "settings.json", USER_SETTINGS)
    (project / ".codex").mkdir(parents=True)
    (project / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    write_json(home / ".claude.json", {"numStartups": 3, "projects": {str(project): {"allowedTools": []}}})
    before_project, before_home = files_under(project), files_under(home)
    for args in (
        ("install", "claude-code", "--session", MANAGER),
        ("install", "claude-code", "--local", "--session", MANAGER),
        ("install", "codex", "--session", MANAGER),
    ):
        res = sw(tmp_path, *args, "--dir", str(project))
        assert res.returncode == 0, res.stderr
    assert (project / ".claude" / "settings.local.json").exists() and (project / ".codex" / "hooks.json").exists()
    for args in (("uninstall", "claude-code"), ("uninstall", "claude-code", "--local"), ("uninstall", "codex")):
        res = sw(tmp_path, *args, "--dir", str(project))
        assert res.returncode == 0, res.stderr
    assert files_under(project) == before_project
    assert files_under(home) == before_home
    assert sorted(p.name for p in project.rglob("*")) == sorted(["settings.json", ".claude", ".codex", "config.toml"])
    assert not list((tmp_path / "state" / "sessionwatch" / "install").iterdir())  # nothing kept once restored


def test_a_file_changed_after_install_loses_only_our_entries(tmp_path: Path) -> None:
    project = tmp_path / "p"
    settings = project / ".claude" / "settings.json"
    write_json(settings, USER_SETTINGS)
    assert sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", MANAGER).returncode == 0
    edited = json.loads(settings.read_text())
    edited["model"] = "opus"  # the person edits the file after install
    write_json(settings, edited)
    res = sw(tmp_path, "uninstall", "claude-code", "--dir", str(project))
    assert res.returncode == 0, res.stderr
    assert json.loads(settings.read_text()) == {**USER_SETTINGS, "model": "opus"}  # their edit stays
    assert not (project / ".mcp.json").exists()  # install created it and nothing else is in it
    assert set(files_under(project)) == {".claude/settings.json"}  # no backup, no file of ours left


def test_local_scope_writes_this_persons_files_with_this_installations_path(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    state = {
        "numStartups": 12,
        "projects": {str(project): {"allowedTools": ["Read"]}},
        "mcpServers": USER_MCP["mcpServers"],
    }
    write_json(home / ".claude.json", state)
    res = sw(
        tmp_path,
        "install",
        "claude-code",
        "--local",
        "--dir",
        str(project),
        "--session",
        MANAGER,
        store=f"sqlite:///{tmp_path / 'sw.db'}",
    )
    assert res.returncode == 0, res.stderr
    assert not (project / ".claude" / "settings.json").exists() and not (project / ".mcp.json").exists()
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    cmd = shlex.split(ours(local, "SessionStart")[0])
    assert os.path.isabs(cmd[0]) and cmd[1:3] == ["--store", f"sqlite:///{tmp_path / 'sw.db'}"]
    assert local["permissions"]["allow"] == ["mcp__sessionwatch"] and "enabledMcpjsonServers" not in local
    claude = json.loads((home / ".claude.json").read_text())
    assert claude["numStartups"] == 12 and set(claude["mcpServers"]) == {"github"}  # the user's servers: as they were
    entry = claude["projects"][str(project)]
    assert entry["allowedTools"] == ["Read"] and entry["mcpServers"]["sessionwatch"]["alwaysLoad"] is True
    assert sw(tmp_path, "uninstall", "claude-code", "--local", "--dir", str(project)).returncode == 0
    assert json.loads((home / ".claude.json").read_text()) == state
    assert not (project / ".claude").exists()  # install created the folder: gone with the file


def test_user_scope_never_binds_every_session_to_one_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res = sw(tmp_path, "install", "claude-code", "--user", "--session", MANAGER)
    assert res.returncode == 2 and "every session on this machine" in res.stderr
    assert not home.exists() or not list(home.rglob("*"))  # nothing written
    res = sw(tmp_path, "install", "claude-code", "--user", store=f"sqlite:///{tmp_path / 'sw.db'}")
    assert res.returncode == 0, res.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert "--session" not in ours(settings, "SessionStart")[0] and "--store" in ours(settings, "SessionStart")[0]
    # each host session its own key: the MCP server takes it from Claude Code's session id, so no key
    # and no agent are written (the agent is the folder each session runs in)
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["sessionwatch"]
    assert server["args"][-1] == "mcp" and "--session" not in server["args"] and "--agent" not in server["args"]
    assert (tmp_path / "sw.db").stat().st_size > 0  # the store each session's first event writes into
    assert sw(tmp_path, "uninstall", "claude-code", "--user").returncode == 0
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()


def test_session_is_validated_and_a_missing_one_is_a_warning(tmp_path: Path) -> None:
    project = tmp_path / "p"
    for bad in ("main", "agent::main", "agent:main"):
        res = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", bad)
        assert res.returncode == 2 and "--session" in res.stderr, (bad, res.stderr)
    assert not project.exists()
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
    res = sw(tmp_path, "--store", store, "install", "claude-code", "--local", "--dir", str(project), "--session", CHILD)
    assert res.returncode == 0, res.stderr
    assert f"session {CHILD} does not exist yet" in res.stdout
    res = sw(
        tmp_path, "--store", store, "install", "claude-code", "--local", "--dir", str(project), "--session", MANAGER
    )
    assert res.returncode == 0 and "warning" not in res.stdout, res.stdout


def test_committed_files_refuse_a_path_or_a_password_of_this_machine(tmp_path: Path) -> None:
    project = tmp_path / "p"
    for store in (f"sqlite:///{tmp_path / 'sw.db'}", "postgresql://sw:s3cret@db.internal/sw"):
        res = sw(tmp_path, "--store", store, "install", "claude-code", "--dir", str(project), "--session", MANAGER)
        assert res.returncode == 2 and "--local" in res.stderr, res.stderr
    assert not project.exists()
    # what the refusal advises: the store in SESSIONWATCH_STORE, which the hooks read when they run
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    res = subprocess.run(
        [*SESSIONWATCH, "install", "claude-code", "--dir", str(project), "--session", MANAGER],
        capture_output=True,
        text=True,
        env={**env_of(tmp_path), "SESSIONWATCH_STORE": store},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert str(tmp_path) not in (project / ".claude" / "settings.json").read_text()
    assert sw(tmp_path, "uninstall", "claude-code", "--dir", str(project)).returncode == 0
    res = sw(tmp_path, "install", "codex", "--local", "--dir", str(project))
    assert res.returncode == 2 and "Codex has no per-person project file" in res.stderr
    res = sw(
        tmp_path,
        "--store",
        "postgresql://db.internal/sw",
        "install",
        "claude-code",
        "--dir",
        str(project),
        "--session",
        MANAGER,
    )
    assert res.returncode == 0, res.stderr  # a shared database without a secret is fine to commit


def test_codex_project_install_edits_toml_and_hooks_json_and_uninstall_restores(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    config, hooks = project / ".codex" / "config.toml", project / ".codex" / "hooks.json"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_CONFIG)
    write_json(hooks, CODEX_HOOKS)
    before = files_under(project)
    res = sw(tmp_path, "install", "codex", "--dir", str(project), "--session", MANAGER)
    assert res.returncode == 0, res.stderr
    assert "codex is not on PATH" in res.stdout and "/hooks" in res.stdout  # how to trust them by hand
    text = config.read_text()
    assert "# my Codex settings" in text and "# the team's docs server" in text
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"]}
    ours_server = parsed["mcp_servers"]["sessionwatch"]
    assert ours_server["command"] == "sessionwatch" and ours_server["args"] == ["mcp", "--session", MANAGER]
    assert ours_server["required"] is True and "SESSIONWATCH_TOKEN" in ours_server["env_vars"]
    now = json.loads(hooks.read_text())
    assert CODEX_HOOKS["hooks"]["Stop"][0] in now["hooks"]["Stop"]  # theirs kept, ours beside it
    assert CODEX_HOOKS["hooks"]["UserPromptSubmit"][0] in now["hooks"]["UserPromptSubmit"]
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        assert ours(now, event) == [f"sessionwatch hook codex --session {MANAGER}"]
    res = sw(tmp_path, "install", "codex", "--dir", str(project), "--session", MANAGER, "--no-trust")
    assert "Nothing changed." in res.stdout and "--no-trust" in res.stdout
    assert sw(tmp_path, "uninstall", "codex", "--dir", str(project)).returncode == 0
    assert files_under(project) == before


def test_a_foreign_server_of_the_same_name_and_broken_files_are_left_alone(tmp_path: Path) -> None:
    project = tmp_path / "p"
    mine = {"mcpServers": {"sessionwatch": {"command": "docker", "args": ["run", "acme/sessionwatch-proxy"]}}}
    write_json(project / ".mcp.json", mine)
    res = sw(tmp_path, "install", "claude-code", "--dir", str(project), "--session", MANAGER)
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


def test_without_a_session_each_host_session_gets_its_own_key(tmp_path: Path) -> None:
    """No --session: the hooks and the MCP servers name the project's agent (its folder's name, written
    now), and the key comes from each host session's id (Codex's server learns it from Codex's calls)."""
    project = tmp_path / "My Project"
    res = sw(tmp_path, "install", "claude-code", "--dir", str(project))
    assert res.returncode == 0, res.stderr
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["sessionwatch"]
    assert server["args"] == ["mcp", "--agent", "my-project"]
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert ours(settings, "UserPromptSubmit")[0].endswith("hook claude-code --agent my-project")
    assert ours(settings, "SubagentStart") and ours(settings, "SubagentStop")  # subagents become children
    assert settings["permissions"]["allow"] == ["mcp__sessionwatch"]
    res = sw(tmp_path, "install", "codex", "--dir", str(project), "--no-trust", "--verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "MCP server: ok: 6 tools listed" in res.stdout, res.stdout  # it starts as Codex starts it, keyless
    server = tomllib.loads((project / ".codex" / "config.toml").read_text())["mcp_servers"]["sessionwatch"]
    assert server["args"] == ["mcp", "--agent", "my-project"]
    assert server["env"] == {"SESSIONWATCH_HOST_CLI": "codex"}  # the server knows Codex started it


def _pending_notice(store: str) -> str:
    """A person wrote into the child the manager watches: one notice waits for the manager."""
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
        gw.put_session(CHILD)
        assert gw.watch(MANAGER, CHILD)
        gw.inbound(CHILD, "use the 2024 brief", channel="webchat")
        (entry,) = gw.peek_system_events(MANAGER)
        return str(entry["line"])


def test_verify_fires_a_sample_payload_and_shows_what_the_host_would_receive(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    line = _pending_notice(store)
    project = tmp_path / "p"
    res = sw(
        tmp_path,
        "--store",
        store,
        "install",
        "claude-code",
        "--local",
        "--dir",
        str(project),
        "--session",
        MANAGER,
        "--verify",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    verified = json.loads(res.stdout)["verify"]
    assert verified["ok"] is True
    assert verified["hook"]["exitCode"] == 0 and verified["hook"]["additionalContext"] == line
    assert "session_status" in verified["mcp"]["tools"]
    # a verification takes nothing meant for the host: the notice is still there for the real hook
    with Gateway.open(store, timers=False) as gw:
        assert [e["line"] for e in gw.peek_system_events(MANAGER)] == [line]
    human = sw(
        tmp_path,
        "--store",
        store,
        "install",
        "claude-code",
        "--local",
        "--dir",
        str(project),
        "--session",
        MANAGER,
        "--verify",
    )
    assert "the model would read:" in human.stdout and line in human.stdout, human.stdout


def test_doctor_names_what_is_broken_and_the_command_that_fixes_it(tmp_path: Path) -> None:
    project = tmp_path / "p"
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    assert sw(tmp_path, "doctor", "claude-code", "--dir", str(project)).returncode == 1  # nothing installed
    # what an older install left: hooks and a server, no permission, tools deferred
    write_json(
        project / ".mcp.json",
        {"mcpServers": {"sessionwatch": {"command": "sessionwatch", "args": ["mcp", "--session", MANAGER]}}},
    )
    hook = {
        "hooks": [{"type": "command", "command": f"sessionwatch --store {store} hook claude-code --session {MANAGER}"}]
    }
    write_json(project / ".claude" / "settings.json", {"hooks": {"SessionStart": [hook], "UserPromptSubmit": [hook]}})
    res = sw(tmp_path, "doctor", "claude-code", "--dir", str(project), "--json")
    assert res.returncode == 1, res.stdout
    (scope,) = [s for s in json.loads(res.stdout)["hosts"][0]["scopes"] if s["installed"]]
    failed = {c["check"]: c for c in scope["checks"] if c["ok"] is False}
    assert set(failed) == {"hooks", "mcp", "permitted", "approved"}, failed
    assert "PostToolUse" in failed["hooks"]["detail"] and "ToolSearch" in failed["mcp"]["detail"]
    # the hooks name this machine's store file, which --project refuses (its files are committed): the fix
    # is this person's files, and it is a command install accepts
    fix = failed["permitted"]["fix"]
    assert fix == f"sessionwatch --store {store} install claude-code --local --dir {project} --session {MANAGER}"
    assert {c["fix"] for c in failed.values()} == {fix}
    res = sw(tmp_path, *shlex.split(fix)[1:])
    assert res.returncode == 0, res.stdout + res.stderr
    res = sw(tmp_path, "uninstall", "claude-code", "--dir", str(project))  # the old project install goes
    res = sw(tmp_path, "doctor", "claude-code", "--dir", str(project))
    assert res.returncode == 0, res.stdout
    assert "local" in res.stdout and "FAIL" not in res.stdout and "6 tools listed" in res.stdout


def test_a_server_installed_without_a_session_is_checked_as_claude_code_starts_it(tmp_path: Path) -> None:
    # each Claude Code session its own key: the server finds it from the session id Claude Code hands it,
    # and doctor and --verify start it the same way
    project = tmp_path / "p"
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    res = sw(tmp_path, "--store", store, "install", "claude-code", "--local", "--dir", str(project), "--verify")
    assert res.returncode == 0, res.stdout + res.stderr
    res = sw(tmp_path, "doctor", "claude-code", "--dir", str(project))
    assert res.returncode == 0, res.stdout
    assert "FAIL" not in res.stdout and "6 tools listed" in res.stdout


def test_doctor_s_fix_for_a_host_without_per_person_files_leaves_the_store_to_the_environment(
    tmp_path: Path,
) -> None:
    """Codex has no per-person project file: a project install naming this machine's store is fixed by the
    same install without ``--store`` (the hooks then read ``SESSIONWATCH_STORE``), which install accepts."""
    project = tmp_path / "p"
    store = f"sqlite:///{tmp_path / 'sw.db'}"
    with Gateway.open(store, timers=False) as gw:
        gw.put_session(MANAGER)
    command = f"sessionwatch --store {store} hook codex --session {MANAGER}"
    hooks = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}}
    write_json(project / ".codex" / "hooks.json", hooks)
    res = sw(tmp_path, "doctor", "codex", "--dir", str(project), "--json")
    assert res.returncode == 1, res.stdout
    (scope,) = [s for s in json.loads(res.stdout)["hosts"][0]["scopes"] if s["installed"]]
    fix = next(c["fix"] for c in scope["checks"] if c["check"] == "hooks")
    assert fix == (
        f"sessionwatch install codex --project --dir {project} --session {MANAGER}"
        "  # and set SESSIONWATCH_STORE where codex runs"
    )
    res = subprocess.run(
        [*SESSIONWATCH, *shlex.split(fix, comments=True)[1:], "--no-trust"],
        capture_output=True,
        text=True,
        env={**env_of(tmp_path), "SESSIONWATCH_STORE": store},
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    written = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]
    assert all(store not in h["command"] for groups in written.values() for g in groups for h in g["hooks"])


def test_the_http_hooks_timeout_is_the_hook_budget(tmp_path: Path) -> None:
    """2 s by default, ``SESSIONWATCH_HOOK_BUDGET`` when install runs with it (0.1 to 30; else 2 s);
    the SessionStart command hook keeps the host's own limit."""
    for setting, timeout in ((None, 2), ("0.5", 0.5), ("5", 5), ("lots", 2), ("99", 2)):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
        env["XDG_STATE_HOME"] = str(tmp_path / "state")
        if setting is not None:
            env["SESSIONWATCH_HOOK_BUDGET"] = setting
        project = tmp_path / f"p{setting}"
        project.mkdir()
        cmd = [*SESSIONWATCH, "--gateway", "http://127.0.0.1:7878", "install", "claude-code", "--dir", str(project)]
        res = subprocess.run(
            [*cmd, "--session", "agent:main:main"], capture_output=True, text=True, env=env, timeout=120
        )
        assert res.returncode == 0, res.stdout + res.stderr
        written = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
        handlers = {event: g["hooks"][0] for event, groups in written.items() for g in groups}
        assert handlers["SessionStart"]["type"] == "command" and handlers["SessionStart"]["timeout"] == 10
        http = [x for x in handlers.values() if x["type"] == "http"]
        assert http and all(x["timeout"] == timeout for x in http), (setting, handlers)
