"""``Engine``: every concern of the engine composed over the shared state (``core.GatewayCore``).

It is what the tool layer (``engine/tools/``) runs against. ``engine/gateway.py`` builds ``Gateway`` on it: the
same methods, plus opening, closing and running a tool (``call_tool``), so the tools never import the module
that runs them.
"""

from __future__ import annotations

from .admin import Administration
from .sessions import Sessions
from .system_events import SystemEvents
from .upstream_facade import UpstreamFacade


class Engine(Sessions, SystemEvents, UpstreamFacade, Administration):
    """The concerns of the engine on one shared state; open one as a :class:`~sessionwatch.engine.Gateway`."""
