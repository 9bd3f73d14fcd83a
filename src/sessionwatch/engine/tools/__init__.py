"""The tool layer: one definition per tool (schema, description, handler), shared by every face.

``registry`` holds the six definitions and ``run_tool``; each tool's handler is a module of its own
(``spawn``, ``send``, ``status``, ``listing``, ``history``, ``unwatch``) over ``base``.
"""

from __future__ import annotations

from .base import BODY_LINE, MAX_SEND_TIMEOUT_S, Caller, Hints, Tool, frame_message
from .registry import TOOLS, run_tool

__all__ = ["BODY_LINE", "MAX_SEND_TIMEOUT_S", "TOOLS", "Caller", "Hints", "Tool", "frame_message", "run_tool"]
