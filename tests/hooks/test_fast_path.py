"""The hook's fast path (no click) takes every hook invocation, whatever its options, and leaves the other
commands to click."""

from __future__ import annotations

import subprocess

from sessionwatch.cli.fast import Invocation, parse
from tests.support.commands import SESSIONWATCH


def test_it_reads_the_options_click_defines() -> None:
    assert parse(["--store", "sqlite:///x.db", "hook", "claude-code", "--session", "agent:main:main"]) == Invocation(
        {"store": "sqlite:///x.db", "host": "claude-code", "session": "agent:main:main"}, []
    )
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
    ) == Invocation(
        {
            "gateway": "http://127.0.0.1:7878",
            "json": "1",
            "host": "codex",
            "no_nudge": "1",
            "nudge_wait": "0",
            "log_file": "-",
        },
        [],
    )


def test_what_it_does_not_understand_is_left_out_with_a_reason_never_an_error() -> None:
    cases = {
        ("hook", "codex", "--bogus", "--session", "agent:a:main"): ("unknown option '--bogus'", "session"),
        ("hook", "gemini"): ("unknown host 'gemini'", None),
        ("hook",): ("no host given", None),
        ("--log-level", "loud", "hook", "codex"): ("--log-level 'loud'", None),
        ("hook", "codex", "--nudge-wait", "99999"): ("--nudge-wait '99999'", None),
        ("hook", "codex", "--session"): ("--session has no value", None),
        ("--frobnicate", "hook", "codex"): ("unknown option '--frobnicate'", None),
        ("hook", "codex", "stray"): ("unexpected argument 'stray'", None),
    }
    for args, (problem, kept) in cases.items():
        inv = parse(list(args))
        assert inv is not None, args
        assert any(problem in p for p in inv.problems), (args, inv)
        if kept:
            assert kept in inv.opts, (args, inv)


def test_other_commands_and_the_groups_own_help_go_to_click() -> None:
    for args in (["sessions"], ["--help"], ["--version"], ["status", "hook"], []):
        assert parse(args) is None, args
    assert parse(["hook", "claude-code", "--help"]) == Invocation({}, [], help=True)


def test_help_goes_to_stderr_and_a_bad_option_still_exits_0() -> None:
    res = subprocess.run([*SESSIONWATCH, "hook", "claude-code", "--help"], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (0, "")
    assert "Usage: sessionwatch hook" in res.stderr
    res = subprocess.run(
        [*SESSIONWATCH, "hook", "claude-code", "--bogus", "--log-file", "-"],
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (res.returncode, res.stdout) == (0, "")
    assert "unknown option '--bogus'" in res.stderr
    res = subprocess.run([*SESSIONWATCH, "sessions", "--bogus"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--bogus" in res.stderr  # every other command keeps click's usage errors


def test_the_gateway_quick_path_s_url_reading_matches_what_it_stands_for() -> None:
    """``gateway_quick`` keeps its own ``quote`` and URL split, so as not to load ``urllib.parse``: each
    must say what urllib's says."""
    from urllib.parse import quote, urlsplit

    from hypothesis import given, settings, strategies as st

    from sessionwatch.hooks import gateway_quick

    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.sampled_from(["", ":@", "/"]))
    def quoted(text: str, safe: str) -> None:
        assert gateway_quick.quote(text, safe) == quote(text, safe=safe)

    quoted()
    for url in (
        "http://127.0.0.1:7878",
        "http://127.0.0.1:7878/",
        "http://Gateway.Example:80/sw/",
        "http://localhost/base/path",
        "http://[::1]:9000/x",
        "HTTP://host:1",
    ):
        parts = urlsplit(url)
        want = (parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/"))
        assert gateway_quick.split(url) == want, url
    for url in ("http://u:p@host/", "http://host:port/", "http://host/?q=1", "http://host/#f", "https://host/"):
        assert gateway_quick.split(url) is None, url  # the full run's, which says why


def test_the_nudge_looks_as_long_by_default_whichever_way_the_hook_runs() -> None:
    """Click's command and the run (whose default the fast path passes on) agree on the nudge's default
    wait, within what the fast path accepts: a host installed either way finds a late row the same."""
    from sessionwatch.cli import fast
    from sessionwatch.cli.hooks import hook_cmd
    from sessionwatch.hooks.run import NUDGE_RETRY_MS

    (option,) = [p for p in hook_cmd.params if p.name == "nudge_wait"]
    assert option.default == NUDGE_RETRY_MS <= fast.MAX_NUDGE_WAIT_MS
