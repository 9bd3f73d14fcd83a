"""The hook's fast path (no click) takes exactly the hook invocations and leaves the rest to click."""

from __future__ import annotations

import subprocess

from sessionwatch.cli.fast import parse
from tests.support.commands import SESSIONWATCH


def test_it_reads_the_options_click_defines() -> None:
    assert parse(["--store", "sqlite:///x.db", "hook", "claude-code", "--session", "agent:main:main"]) == {
        "store": "sqlite:///x.db",
        "host": "claude-code",
        "session": "agent:main:main",
    }
    assert parse(
        [
            "--gateway=http://127.0.0.1:7878",
            "--json",
            "hook",
            "codex",
            "--no-nudge",
            "--nudge-wait",
            "0",
            "--log-file",
            "-",
        ]
    ) == {"gateway": "http://127.0.0.1:7878", "host": "codex", "no_nudge": "1", "nudge_wait": "0", "log_file": "-"}


def test_anything_else_goes_to_click() -> None:
    for args in (
        ["hook", "claude-code", "--help"],
        ["hook", "--help"],
        ["hook", "gemini"],
        ["hook", "codex", "--bogus"],
        ["--log-level", "loud", "hook", "codex"],
        ["sessions"],
        ["hook", "codex", "--nudge-wait", "99999"],
        ["hook", "codex", "--session"],
    ):
        assert parse(args) is None, args


def test_click_still_answers_help_and_usage_errors() -> None:
    res = subprocess.run([*SESSIONWATCH, "hook", "claude-code", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "Usage: sessionwatch hook" in res.stdout
    res = subprocess.run([*SESSIONWATCH, "hook", "claude-code", "--bogus"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--bogus" in res.stderr
