"""MCP face fixtures: a bound session over the engine, and a real SDK client in memory."""

from __future__ import annotations

import pytest

from sessionwatch import Gateway
from sessionwatch.mcpserver import SessionBinding

MANAGER = "agent:main:main"
CHILD = "agent:main:subagent:kid"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    """'auto' negotiates the 2026-07-28 protocol; 'legacy' the initialize handshake older hosts use."""
    return request.param


@pytest.fixture
def binding(gw: Gateway) -> SessionBinding:
    b = SessionBinding(gw, MANAGER)
    b.ensure_session()
    return b
