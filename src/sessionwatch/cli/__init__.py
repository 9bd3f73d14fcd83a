"""The ``sessionwatch`` command line (click + rich). Entry point: :func:`main`.

Command modules are imported when the group first needs them (``app.Group``), so a hook run
(``sessionwatch hook ...``, on a person's prompt path) loads only its own module.
"""

from __future__ import annotations

from .app import cli
from .exitcodes import CONFLICT, DENIED, ERROR, NOT_FOUND, OK, USAGE


def main() -> None:
    cli(prog_name="sessionwatch")


__all__ = ["main", "cli", "OK", "ERROR", "USAGE", "NOT_FOUND", "DENIED", "CONFLICT"]
