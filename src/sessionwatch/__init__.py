"""sessionwatch: session state awareness for multi-agent systems.

    from sessionwatch import Gateway
    gw = Gateway.open("sqlite:///state.db")
"""

from .engine import Gateway, Subscription, TOOLS, Wake
from .errors import (Conflict, Forbidden, InvalidArgument, NotFound, PayloadTooLarge, SessionwatchError,
                     StoreUnavailable, Unauthorized, Unavailable, UnknownTool)
from .notices import notice_text
from .settings import Settings

__version__ = "0.1.0"

__all__ = ["Gateway", "Subscription", "TOOLS", "Wake", "Settings", "notice_text", "SessionwatchError",
           "InvalidArgument", "NotFound", "UnknownTool", "Forbidden", "Unauthorized", "PayloadTooLarge", "Conflict",
           "StoreUnavailable", "Unavailable", "__version__"]
