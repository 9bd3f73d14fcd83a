"""Fixtures shared by the conformance tests (on top of tests/conftest.py's gw/store_url/clock)."""

from __future__ import annotations

import pytest

from sessionwatch import Gateway

from ._helpers import MAIN, spawn


@pytest.fixture
def family(gw: Gateway) -> Gateway:
    """main spawned agent:a:subagent:kid (run-1) and watches it."""
    gw.put_session(MAIN)
    spawn(gw, MAIN, "kid", run_id="run-1")
    return gw
