"""How tests start the ``sessionwatch`` command line as a subprocess, on any machine.

The console script is looked for beside the interpreter running the tests (the virtual environment's
``bin``), so no environment variable and no machine-specific path is needed. Without an installed
script (the package imported from a source tree) ``python -m sessionwatch`` runs the same CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path


def sessionwatch_command() -> list[str]:
    """The argv prefix that runs the ``sessionwatch`` CLI with the interpreter running the tests."""
    script = Path(sys.executable).with_name("sessionwatch")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "sessionwatch"]


SESSIONWATCH = sessionwatch_command()
