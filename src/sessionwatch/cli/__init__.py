"""The ``sessionwatch`` command line (click + rich). Entry point: :func:`main`."""

from __future__ import annotations

from . import demo, servers, sessions, settings_cmd, tokens, top, upstream  # noqa: F401  (they register their commands)
from .app import cli
from .exitcodes import CONFLICT, DENIED, ERROR, NOT_FOUND, OK, USAGE


def main() -> None:
    cli(prog_name="sessionwatch")


__all__ = ["main", "cli", "OK", "ERROR", "USAGE", "NOT_FOUND", "DENIED", "CONFLICT"]
