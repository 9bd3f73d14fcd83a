"""sessionwatch: session state awareness for multi-agent systems.

    from sessionwatch import Gateway
    gw = Gateway.open("sqlite:///state.db")

The names below are loaded on first use (PEP 562), so ``import sessionwatch.<module>`` stays cheap
(the hook command runs on a person's prompt path).
"""

from __future__ import annotations

# Not typing.TYPE_CHECKING: importing typing is a noticeable part of a hook run, and type checkers treat
# any name TYPE_CHECKING as true.
TYPE_CHECKING = False

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ below loads each on first use
    from .engine import TOOLS, Gateway, Subscription, Wake
    from .errors import (
        Conflict,
        Forbidden,
        InvalidArgument,
        NotFound,
        PayloadTooLarge,
        RateLimited,
        SessionwatchError,
        StoreInDoubt,
        StoreUnavailable,
        StoreUnreachable,
        Unauthorized,
        Unavailable,
        UnknownTool,
    )
    from .notices import notice_text
    from .settings import Settings

__version__ = "0.2.0"

_LAZY = {
    "Gateway": "engine",
    "Subscription": "engine",
    "TOOLS": "engine",
    "Wake": "engine",
    "Settings": "settings",
    "notice_text": "notices",
    **dict.fromkeys(
        (
            "SessionwatchError",
            "InvalidArgument",
            "NotFound",
            "UnknownTool",
            "Forbidden",
            "Unauthorized",
            "PayloadTooLarge",
            "Conflict",
            "RateLimited",
            "StoreUnavailable",
            "StoreUnreachable",
            "StoreInDoubt",
            "Unavailable",
        ),
        "errors",
    ),
}

__all__ = [
    "Gateway",
    "Subscription",
    "TOOLS",
    "Wake",
    "Settings",
    "notice_text",
    "SessionwatchError",
    "InvalidArgument",
    "NotFound",
    "UnknownTool",
    "Forbidden",
    "Unauthorized",
    "PayloadTooLarge",
    "Conflict",
    "RateLimited",
    "StoreUnavailable",
    "StoreUnreachable",
    "StoreInDoubt",
    "Unavailable",
    "__version__",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionwatch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
