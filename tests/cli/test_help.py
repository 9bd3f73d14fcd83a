"""Every command documents itself: --help works, shows examples and the --json flag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sessionwatch.cli import cli
from sessionwatch.cli.app import LAZY

from .conftest import Runner

cli.list_commands(None)  # type: ignore[arg-type]  # commands load on first need
COMMANDS = sorted(cli.commands)


def test_the_documented_command_set_is_there() -> None:
    assert set(COMMANDS) >= {
        "serve",
        "token",
        "mcp",
        "sessions",
        "status",
        "send",
        "watch",
        "unwatch",
        "drain",
        "log",
        "prune",
        "put",
        "inbound",
        "cursors",
        "demo",
        "threads",
        "adopt",
        "link",
        "tick",
        "upstream-results",
        "pair",
        "node",
    }


def test_each_command_loads_only_its_own_module() -> None:
    registered = {
        name: command.callback.__module__ if command.callback else "" for name, command in cli.commands.items()
    }
    groups = {name: type(command).__module__ for name, command in cli.commands.items() if command.callback is None}
    assert not groups, groups  # a group registers through its callback's module too
    assert {name: f"sessionwatch.cli.{module}" for name, module in LAZY.items()} == registered


def test_a_session_command_starts_without_the_servers_kit(tmp_path: Path) -> None:
    """What every shell call and hook-adjacent command pays at start: no uvicorn, no HTTP app, and for JSON
    output (what scripts and hosts ask for) no rich either."""
    code = (
        "import sys; sys.argv = ['sessionwatch', '--store', sys.argv[1], 'sessions', '--json']\n"
        "from sessionwatch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "kit = ('uvicorn', 'starlette', 'sessionwatch.serving', 'sessionwatch.http', 'rich')\n"
        "loaded = [m for m in kit if m in sys.modules]\n"
        "print('LOADED', loaded, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{tmp_path / 'state.db'}"], capture_output=True, text=True, timeout=60
    )
    assert "LOADED []" in out.stderr, out.stderr[-2000:]


def test_top_level_help_lists_exit_codes(sw: Runner) -> None:
    r = sw("--help")
    assert r.code == 0, r
    assert "3 not found" in r.out and "Examples:" in r.out
    for name in COMMANDS:
        assert name in r.out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_examples(sw: Runner, name: str) -> None:
    r = sw(name, "--help")
    assert r.code == 0, r
    # A host reads a hook's stdout as its answer, so the hook's help goes to stderr.
    shown = r.err if name == "hook" else r.out
    assert f"Usage: sessionwatch {name}" in shown
    assert "Examples:" in shown
    assert f"sessionwatch {name}" in shown.split("Examples:")[1] or f" {name} " in shown.split("Examples:")[1]
    assert "--json" in shown


def test_unknown_command_and_missing_argument_are_usage_errors(sw: Runner) -> None:
    assert sw("frobnicate").code == 2
    assert sw("status").code == 2
    assert sw("send", "agent:main:main", "hi").code == 2  # --as is required
