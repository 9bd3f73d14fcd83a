"""Shared fixtures. ``store_url`` runs a test against every backend (SQLite always; PostgreSQL when
tests/support/pg.py can reach the server), each test with a fresh store."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sessionwatch import Gateway
from sessionwatch.clock import ManualClock

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist gives its workers a made-up 80x24 terminal; the CLI's tables would then wrap as in one,
    # unlike the pipe a test reads them from without workers
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: three workers per core. Many tests spend their time waiting on processes they started
    (gateways, the real hosts, a fake model), so more workers than cores keep the cores busy; on a 2-core
    machine with one core busy with other work the suite took 10:07 with three per core against 10:58 with
    two (the same day: the suite gets a larger share of a shared machine)."""
    return 3 * (os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With workers, and no ``--dist`` given, share the tests by work stealing. The default ("load") hands
    out consecutive runs of tests, so near the end one worker could be left alone with a run of real-host tests
    (six minutes of them, the other workers done); a worker out of tests now takes half of the longest queue."""
    if config.getoption("numprocesses", None) and config.getoption("dist", "no") == "no":
        config.option.dist = "worksteal"


def _backends() -> list[str]:
    backends = ["sqlite"]
    if os.environ.get("SESSIONWATCH_TEST_PG", "1") != "0":
        try:
            from tests.support import pg
        except ImportError:
            return backends
        if pg.available():
            backends.append("postgresql")
    return backends


BACKENDS = _backends()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    from tests.support import pg

    with pg.fresh_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/state.db"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def gw(store_url: str, clock: ManualClock) -> Iterator[Gateway]:
    gateway = Gateway.open(store_url, clock=clock)
    yield gateway
    gateway.close()
