"""The engine: recording, watches, notices, wakes and tools. Knows nothing of HTTP, MCP or the CLI.

Names load on first use, so importing ``engine.gateway`` alone (the hook command) skips the tools.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Gateway": "gateway",
    "default_store_url": "gateway",
    "TOOLS": "tools",
    "Tool": "tools",
    "Subscription": "wakes",
    "Wake": "wakes",
}

__all__ = ["Gateway", "default_store_url", "TOOLS", "Tool", "Subscription", "Wake"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
