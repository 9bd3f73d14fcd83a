"""A fast path for ``sessionwatch [global options] hook HOST [options]``: the host runs it before every
prompt, so it skips click (and the command modules) and goes straight to ``hooks.run``.

It understands exactly the options the click commands define (``app.cli`` and ``hooks.hook_cmd``) and
their environment variables; anything else (``--help``, a typo, another command) returns False and
the regular click command line handles it, with its usual help and usage errors.
"""

from __future__ import annotations

import os

GLOBAL_VALUES = {"--store": "store", "--gateway": "gateway", "--token": "token", "--log-level": "log_level"}
HOOK_VALUES = {"--session": "session", "--agent": "agent", "--nudge-wait": "nudge_wait", "--log-file": "log_file"}
HOOK_FLAGS = {"--no-nudge": "no_nudge", "--foreground-nudge": "foreground_nudge", "--json": "json"}
LEVELS = ("debug", "info", "warning", "error")
HOSTS = ("claude-code", "codex")


def _take(args: list[str], i: int, names: dict[str, str], out: dict[str, str]) -> int | None:
    """Read the value option at args[i] (``--x v`` or ``--x=v``); the index after it, or None."""
    name, eq, value = args[i].partition("=")
    if name not in names:
        return None
    if not eq:
        if i + 1 >= len(args):
            return None
        value = args[i + 1]
        i += 1
    out[names[name]] = value
    return i + 1


def parse(args: list[str]) -> dict[str, str] | None:
    """The options of a hook invocation, or None when it is not one this fast path is sure about."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i] != "hook":
        if args[i] == "--json":
            i += 1
            continue
        nxt = _take(args, i, GLOBAL_VALUES, opts)
        if nxt is None:
            return None
        i = nxt
    if i + 1 >= len(args) or args[i + 1] not in HOSTS:
        return None
    opts["host"] = args[i + 1]
    i += 2
    while i < len(args):
        if args[i] in HOOK_FLAGS:
            opts[HOOK_FLAGS[args[i]]] = "1"
            i += 1
            continue
        nxt = _take(args, i, HOOK_VALUES, opts)
        if nxt is None:
            return None
        i = nxt
    if opts.get("log_level", "warning") not in LEVELS:
        return None
    wait = opts.get("nudge_wait", "2000")
    if not wait.isdigit() or int(wait) > 10_000:
        return None
    return opts


def run_hook(args: list[str]) -> bool:
    """Run the hook when ``args`` is a hook invocation; False (nothing done) otherwise."""
    opts = parse(args)
    if opts is None:
        return False
    from ..hooks.run import main, setup_logging

    level = opts.get("log_level", "warning")
    setup_logging(opts.get("log_file"), "info" if level == "warning" else level)
    gateway = opts.get("gateway", os.environ.get("SESSIONWATCH_GATEWAY")) or None
    main(
        opts["host"],
        session=opts.get("session"),
        agent=opts.get("agent"),
        store=opts.get("store", os.environ.get("SESSIONWATCH_STORE")) or None,
        gateway=gateway,
        token=opts.get("token", os.environ.get("SESSIONWATCH_TOKEN")) or None,
        nudge="no_nudge" not in opts,
        nudge_retry_ms=int(opts.get("nudge_wait", "2000")),
        foreground_nudge="foreground_nudge" in opts,
    )
    return True
