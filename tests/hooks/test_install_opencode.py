"""install/uninstall/doctor opencode against a project whose opencode.json already holds a person's settings.

The plugin goes to ``.sessionwatch/opencode-plugin.js`` (not ``.opencode/``, which would make OpenCode
npm-install its plugin package on the next start) and is listed relatively in ``opencode.json``; the files
name no path of this machine. Installing again changes nothing, uninstall takes out exactly our entry and
file, and ``doctor``/``--verify`` fire a sample prompt through the plugin's own command line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionwatch.hosts.opencode.install import settings_of
from tests.hooks.test_install import env_of, sw

USER_CONFIG = {
    "$schema": "https://opencode.ai/config.json",
    "model": "anthropic/claude-sonnet-4-5",
    "plugin": ["opencode-wakatime"],
    "mcp": {"docs": {"type": "local", "command": ["npx", "-y", "docs-mcp"]}},
}


def test_install_lists_the_plugin_beside_the_persons_own_and_uninstall_takes_out_only_ours(tmp_path: Path) -> None:
    project = tmp_path / "acme"
    project.mkdir()
    (project / "opencode.json").write_text(json.dumps(USER_CONFIG, indent=2))
    res = sw(tmp_path, "install", "opencode", "--dir", str(project))
    assert res.returncode == 0, res.stdout + res.stderr
    config = json.loads((project / "opencode.json").read_text())
    assert config["plugin"] == ["opencode-wakatime", "./.sessionwatch/opencode-plugin.js"]
    # the tools: our MCP server beside the person's, started as this install's plugin runs the hook
    assert config["mcp"] == {
        **USER_CONFIG["mcp"],  # type: ignore[dict-item]
        "sessionwatch": {
            "type": "local",
            "command": ["sessionwatch", "mcp", "--agent", "acme"],
            "environment": {"SESSIONWATCH_SESSION_PER_CALL": "opencode"},
            "enabled": True,
            "timeout": 605000,
        },
    }
    assert config["permission"] == {"sessionwatch_*": "allow"}  # OpenCode calls them without asking
    assert {k: v for k, v in config.items() if k not in ("plugin", "mcp", "permission")} == {
        k: v for k, v in USER_CONFIG.items() if k not in ("plugin", "mcp")
    }
    plugin = (project / ".sessionwatch" / "opencode-plugin.js").read_text()
    assert settings_of(plugin) == {"command": ["sessionwatch"], "globalArgs": [], "hookArgs": ["--agent", "acme"]}
    assert str(tmp_path) not in plugin + (project / "opencode.json").read_text()  # committed: no machine path
    assert not (project / ".opencode").exists()

    again = sw(tmp_path, "install", "opencode", "--dir", str(project), "--json")
    assert [c["action"] for c in json.loads(again.stdout)["changes"]] == ["unchanged", "unchanged"]

    doctor = sw(tmp_path, "doctor", "opencode", "--dir", str(project), "--json")
    report = json.loads(doctor.stdout)
    assert "hosts" in report, doctor.stdout + doctor.stderr
    (scope,) = [s for s in report["hosts"][0]["scopes"] if s["scope"] == "project"]
    checks = {c["check"]: c for c in scope["checks"]}
    assert checks["plugin"]["ok"] and checks["config"]["ok"] and checks["command"]["ok"], checks
    assert checks["mcp"]["ok"] and "6 tools listed" in checks["mcp"]["detail"], checks["mcp"]
    assert checks["permitted"]["ok"], checks["permitted"]
    assert doctor.returncode == 0, doctor.stdout

    out = sw(tmp_path, "uninstall", "opencode", "--dir", str(project))
    assert out.returncode == 0, out.stderr
    assert (project / "opencode.json").read_text() == json.dumps(USER_CONFIG, indent=2)  # byte for byte
    assert not (project / ".sessionwatch").exists()
    assert sw(tmp_path, "doctor", "opencode", "--dir", str(project)).returncode == 1  # nothing installed


def test_install_into_a_fresh_folder_then_uninstall_leaves_nothing_and_verify_answers(tmp_path: Path) -> None:
    project = tmp_path / "fresh"
    project.mkdir()
    res = sw(tmp_path, "install", "opencode", "--dir", str(project), "--session", "agent:main:worker", "--verify")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify    UserPromptSubmit through the plugin's command: exit 0" in res.stdout
    plugin = (project / ".sessionwatch" / "opencode-plugin.js").read_text()
    assert settings_of(plugin)["hookArgs"] == ["--session", "agent:main:worker"]  # type: ignore[index]
    assert sw(tmp_path, "uninstall", "opencode", "--dir", str(project)).returncode == 0
    assert list(project.iterdir()) == []


def test_what_install_opencode_refuses(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    local = sw(tmp_path, "install", "opencode", "--local", "--dir", str(project))
    assert local.returncode != 0 and "no per-person project file" in local.stdout + local.stderr
    store = sw(tmp_path, "install", "opencode", "--dir", str(project), store=f"sqlite:///{tmp_path / 's.db'}")
    assert store.returncode != 0 and "--store" in store.stdout + store.stderr  # a file of this machine
    (project / "opencode.json").write_text("{not json")
    broken = sw(tmp_path, "install", "opencode", "--dir", str(project))
    assert broken.returncode != 0 and "not valid JSON" in broken.stdout + broken.stderr
    assert not (project / ".sessionwatch").exists()  # nothing written


def test_user_scope_names_this_installation_and_its_own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)  # the scratch HOME's ~/.config, never the real one
    env = env_of(tmp_path)
    res = sw(tmp_path, "install", "opencode", "--user")
    assert res.returncode == 0, res.stdout + res.stderr
    config_dir = Path(env["HOME"]) / ".config" / "opencode"
    entry = json.loads((config_dir / "opencode.json").read_text())["plugin"]
    assert entry == [str(config_dir / "sessionwatch" / "plugin.js")]
    settings = settings_of((config_dir / "sessionwatch" / "plugin.js").read_text())
    assert settings is not None and Path(settings["command"][0]).is_absolute() and settings["hookArgs"] == []
    assert sw(tmp_path, "uninstall", "opencode", "--user").returncode == 0
    assert not (config_dir / "opencode.json").exists()


def test_the_plugin_tells_who_sent_a_prompt_from_the_command_opencode_runs(tmp_path: Path) -> None:
    """The plugin's ``chat.message`` hook, run by node (OpenCode's runtime is Bun; the plugin uses only
    what both give): the TUI, with or without a project folder (also one named like a word, ``opencode
    app``) is a person; ``opencode run`` a program; a server or an unknown word is unknown."""
    import shutil
    import subprocess

    from sessionwatch.hosts.opencode.install import plugin_source

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    (tmp_path / "app").mkdir()
    plugin = tmp_path / "plugin.mjs"
    plugin.write_text(plugin_source(["sessionwatch-is-not-here"], [], []))
    runner = tmp_path / "runner.mjs"
    runner.write_text(
        """
import { readFileSync } from "node:fs";
const [pluginPath, directory, ...argv] = process.argv.slice(2);
const BUNFS = "/$bunfs/" + "root";
process.argv = ["bun", BUNFS + "/src/index.js", ...argv];  // bun's own virtual root, as OpenCode runs
const { SessionwatchPlugin } = await import(pluginPath);
const hooks = await SessionwatchPlugin({ directory });
const message = { id: "msg_1", sessionID: "ses_1" };
await hooks["chat.message"]({ sessionID: "ses_1" }, { message, parts: [{ type: "text", text: "hi" }] });
const folder = process.env.OPENCODE_DB.replace(/opencode\\.db$/, "");
const line = readFileSync(`${folder}sessionwatch/prompts/ses_1.jsonl`, "utf8");
console.log(JSON.parse(line.trim().split("\\n").pop()).source);
"""
    )
    cases = {
        (): "person",
        ("app",): "person",  # a folder whose name is a plain word
        (str(tmp_path / "app"),): "person",
        ("--agent", "build"): "person",  # an option's value is not the folder
        ("-m", "fake/fake-model", "app"): "person",
        ("run", "hello"): "program",
        ("--log-level", "INFO", "run", "hello"): "program",
        ("serve",): "unknown",
        ("web",): "unknown",
        ("attach", "http://127.0.0.1:4096"): "unknown",
        ("nosuchfolder",): "unknown",  # neither a command nor a folder: maybe a command of a newer OpenCode
    }
    for i, (argv, expected) in enumerate(cases.items()):
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PWD": str(tmp_path),
            "OPENCODE_DB": str(tmp_path / f"db{i}" / "opencode.db"),
        }
        out = subprocess.run(
            [node, str(runner), plugin.as_uri(), str(tmp_path / "app"), *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected, (argv, out.stdout, out.stderr)


def test_a_changed_config_keeps_the_persons_edits_and_rules_and_loses_only_ours(tmp_path: Path) -> None:
    """A config OpenCode or the person changed after install is not given back whole: only our entries come
    out. A one-word permission (``"ask"``) is read as ``{"*": "ask"}`` while ours is beside it, and is one word
    again after. A rule the person wrote for our tools is theirs: install leaves it, doctor reports what it
    does, uninstall keeps it."""
    project = tmp_path / "p"
    project.mkdir()
    config = project / "opencode.json"
    config.write_text(json.dumps({"permission": "ask"}) + "\n")
    assert sw(tmp_path, "install", "opencode", "--dir", str(project)).returncode == 0
    data = json.loads(config.read_text())
    assert data["permission"] == {"*": "ask", "sessionwatch_*": "allow"}
    data["model"] = "fake/other"  # the person's edit after install
    config.write_text(json.dumps(data, indent=2) + "\n")
    assert sw(tmp_path, "uninstall", "opencode", "--dir", str(project)).returncode == 0
    assert json.loads(config.read_text()) == {"permission": "ask", "model": "fake/other"}

    config.write_text(json.dumps({"permission": {"sessionwatch_*": "deny"}}))
    assert sw(tmp_path, "install", "opencode", "--dir", str(project)).returncode == 0
    assert json.loads(config.read_text())["permission"] == {"sessionwatch_*": "deny"}
    doctor = sw(tmp_path, "doctor", "opencode", "--dir", str(project), "--json")
    assert doctor.returncode == 1, doctor.stdout
    (scope,) = [s for s in json.loads(doctor.stdout)["hosts"][0]["scopes"] if s["scope"] == "project"]
    permitted = next(c for c in scope["checks"] if c["check"] == "permitted")
    assert permitted["ok"] is False and "refuses every call" in permitted["detail"], permitted
    data = json.loads(config.read_text())
    data["share"] = "disabled"
    config.write_text(json.dumps(data))
    assert sw(tmp_path, "uninstall", "opencode", "--dir", str(project)).returncode == 0
    assert json.loads(config.read_text()) == {"permission": {"sessionwatch_*": "deny"}, "share": "disabled"}


def test_the_plugin_names_the_session_in_the_calls_of_exactly_our_tools() -> None:
    """The plugin adds the calling session only to our server's tools (OpenCode names them
    ``sessionwatch_<tool>``): the six the engine has, no other server's."""
    import re
    from importlib import resources

    from sessionwatch.engine.tools import TOOLS

    text = resources.files("sessionwatch.hosts.opencode").joinpath("plugin.js").read_text(encoding="utf-8")
    listed = re.search(r"const TOOLS = new Set\(\s*\[([^\]]*)\]", text)
    assert listed is not None
    assert re.findall(r'"(\w+)"', listed.group(1)) == list(TOOLS)
