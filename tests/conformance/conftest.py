"""Fixtures of the backend-specific conformance tests (read failures, upgrades) on top of tests/conftest.py."""

from __future__ import annotations

import pytest

from sessionwatch import Gateway
from sessionwatch.testing.helpers import MAIN, spawn


@pytest.fixture
def family(gw: Gateway) -> Gateway:
    """main spawned agent:a:subagent:kid (run-1) and watches it."""
    gw.put_session(MAIN)
    spawn(gw, MAIN, "kid", run_id="run-1")
    return gw
