"""The hosts the hook command answers, by name: each room's hook adapter (``hosts/base.py``: the events it
answers and observes, the answer's shape), from the registry (``hosts/registry.py``).

Any exit code but 0 is an error to a host (exit 2 even blocks the prompt), so the hook always exits 0.
"""

from __future__ import annotations

from ..hosts.base import (
    ANSWERED,
    NOTIFICATION,
    OBSERVED,
    PERMISSION_REQUEST,
    POST_TOOL_USE,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    USER_PROMPT_SUBMIT,
    HookAdapter,
)
from ..hosts.registry import ROOMS

Host = HookAdapter
HOSTS: dict[str, HookAdapter] = {name: r.hook for name, r in ROOMS.items()}

__all__ = [
    "ANSWERED",
    "HOSTS",
    "NOTIFICATION",
    "OBSERVED",
    "PERMISSION_REQUEST",
    "POST_TOOL_USE",
    "SESSION_END",
    "SESSION_START",
    "STOP",
    "SUBAGENT_START",
    "SUBAGENT_STOP",
    "USER_PROMPT_SUBMIT",
    "Host",
    "HookAdapter",
]
