"""Revocation on a PostgreSQL deployment: two real gateway processes on one database refuse a revoked
token within a second, whichever process revoked it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from sessionwatch.store import open_store
from sessionwatch.tokens import create_token, revoke_token
from tests.support import pg
from tests.support.commands import SESSIONWATCH
from tests.support.waiting import wait_until

from ..cli.conftest import clean_env

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")]

ADMIN = "admin-token-two-gateways-0123456789"
KEY = "agent:ops:main"


@pytest.fixture
def db() -> Iterator[str]:
    with pg.fresh_database() as url:
        yield url


def _status(url: str, token: str) -> int:
    return httpx.get(f"{url}/v1/sessions/{KEY}", headers={"Authorization": f"Bearer {token}"}, timeout=5).status_code


def _refused_within(urls: list[str], token: str, limit_s: float) -> float:
    """Poll every gateway until all refuse the token; the seconds that took (fails past ``limit_s``)."""
    started = time.monotonic()
    pending = set(urls)

    def all_refuse() -> bool:
        for url in list(pending):
            if _status(url, token) == 401:
                pending.discard(url)
        return not pending

    wait_until(all_refuse, timeout=limit_s, interval=0.01, what=f"every gateway refusing the token ({pending})")
    return time.monotonic() - started


@pytest.mark.slow
def test_revocation_reaches_every_gateway_within_a_second(db: str, gateway_factory) -> None:
    store = open_store(db)
    try:
        token, row = create_token(store, agents=["ops"])
        other, other_row = create_token(store, agents=["ops"])
        gateways = [gateway_factory(db, token=ADMIN), gateway_factory(db, token=ADMIN)]
        for g in gateways:
            g.start()
        httpx.put(
            f"{gateways[0].url}/v1/sessions/{KEY}", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=5
        ).raise_for_status()
        urls = [g.url for g in gateways]
        for url in urls:  # both accept it, and have it cached
            assert _status(url, token) == 200 and _status(url, other) == 200
        revoke_token(store, row.token_id)
        took = _refused_within(urls, token, 1.0)
        print(f"revocation obeyed by both gateways after {took * 1000:.0f} ms")
        assert all(_status(url, other) == 200 for url in urls)  # the other token is untouched
    finally:
        store.close()
    # the operator's way: the CLI on the same database
    revoked = subprocess.run(
        [*SESSIONWATCH, "--store", db, "token", "revoke", other_row.token_id, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert revoked.returncode == 0 and '"revoked": true' in revoked.stdout, revoked.stderr
    _refused_within(urls, other, 1.0)


def test_the_cli_manages_tokens_on_postgresql(db: str) -> None:
    env = clean_env(SESSIONWATCH_STORE=db)
    made = subprocess.run(
        [*SESSIONWATCH, "token", "create", "--agent", "ops", "--name", "ops team", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run([*SESSIONWATCH, "token", "list"], capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode == 0 and "ops team" in listed.stdout
    assert made.stdout.count('"sw_') == 1  # shown once, at creation
    assert "sw_" not in listed.stdout  # never the token itself
