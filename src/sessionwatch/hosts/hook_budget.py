"""What one hook run may spend on a gateway or PostgreSQL server that does not answer (all its calls
together): 2 s, or ``SESSIONWATCH_HOOK_BUDGET`` seconds (0.1 to 30) for a gateway on a slow link.

The hook command holds each run to it (``hooks/down.py``), and ``install claude-code --gateway`` writes it
as the timeout of the HTTP hooks Claude Code posts to the gateway, the one bound Claude Code keeps for
them. Standard library only: the hook's quick path reads it.
"""

from __future__ import annotations

import os

BUDGET_S = 2.0
BUDGET_ENV = "SESSIONWATCH_HOOK_BUDGET"


def budget_s() -> float:
    """The budget: ``SESSIONWATCH_HOOK_BUDGET`` when it is a number from 0.1 to 30, else 2 s."""
    try:
        value = float(os.environ.get(BUDGET_ENV, ""))
    except ValueError:
        return BUDGET_S
    return value if 0.1 <= value <= 30.0 else BUDGET_S
