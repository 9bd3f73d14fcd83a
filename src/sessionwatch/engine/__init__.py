"""The engine: recording, watches, notices, wakes and tools. Knows nothing of HTTP, MCP or the CLI."""

from .gateway import Gateway, default_store_url
from .tools import TOOLS, Tool
from .wakes import Subscription, Wake

__all__ = ["Gateway", "default_store_url", "TOOLS", "Tool", "Subscription", "Wake"]
