"""The ``sessionwatch`` command line (click + rich). Entry point: :func:`main`.

Nothing heavy is imported here: a host's hook run (``sessionwatch hook ...``, on a person's prompt
path) takes the fast path in ``fast.py`` without click; the click group (``app.cli``) loads its command
modules when it first needs them.
"""

from __future__ import annotations

import sys


def main() -> None:
    from .fast import run_hook

    if run_hook(sys.argv[1:]):  # a host's hook run: no click, no command modules (see fast.py)
        return
    from .mcp_start import run_fast

    if run_fast(sys.argv[1:]):  # a host starting the MCP server: answered before click loads (mcp_start.py)
        return
    from .app import cli

    cli(prog_name="sessionwatch")


_EXIT_CODES = ("OK", "ERROR", "USAGE", "NOT_FOUND", "DENIED", "CONFLICT", "TEMPFAIL")


def __getattr__(name: str) -> object:  # loaded on first use: nothing of it is on a hook's path
    if name == "cli":
        from .app import cli

        return cli
    if name in _EXIT_CODES:
        from .. import exitcodes

        return getattr(exitcodes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main", "cli", "OK", "ERROR", "USAGE", "NOT_FOUND", "DENIED", "CONFLICT", "TEMPFAIL"]
