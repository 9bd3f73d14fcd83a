"""Ids belong to their agent, through a real gateway on loopback with two agent-scoped tokens: a token of
agent a that sends a dedupe key or an operation id agent b used learns nothing of b's event, one that
claims the id b will use next suppresses nothing of b's, and two agents spawning with the same run id
each get their parent's cursor seeded. On both stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch.client import GatewayClient
from sessionwatch.store import open_store
from sessionwatch.tokens import create_token
from tests.support import pg

ADMIN = "admin-token-for-agent-scoped-ids-0123"
A_MAIN, A_KID = "agent:a:main", "agent:a:subagent:kid"
B_MAIN, B_KID = "agent:b:main", "agent:b:subagent:kid"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    if not pg.available():
        pytest.skip("PostgreSQL is not reachable")
    with pg.fresh_database() as url:
        yield url


@pytest.fixture
def clients(store_url: str, gateway_factory: Any) -> Iterator[tuple[GatewayClient, GatewayClient]]:
    store = open_store(store_url)
    try:
        token_a, _ = create_token(store, agents=["a"], name="team a")
        token_b, _ = create_token(store, agents=["b"], name="team b")
    finally:
        store.close()
    gp = gateway_factory(store_url, token=ADMIN).start()
    with GatewayClient(gp.url, token=token_a) as a, GatewayClient(gp.url, token=token_b) as b:
        yield a, b


def _spawn_family(client: GatewayClient, main: str) -> int:
    """``main`` spawns its kid on run-1; returns the version its cursor was seeded at."""
    client.put_session(main)
    spawned = client.call_tool("sessions_spawn", {"label": "kid", "runId": "run-1"}, caller=main)
    assert "error" not in spawned, spawned
    version: int = spawned["stateVersion"]
    return version


def _says_nothing_of_b(answer: dict[str, Any], b_session_id: str) -> None:
    text = json.dumps(answer)
    assert B_KID not in text and b_session_id not in text and '"b"' not in text, answer


def test_two_agents_on_the_same_run_id_each_seed_their_parent(clients: tuple[GatewayClient, GatewayClient]) -> None:
    for client, main, kid in ((clients[0], A_MAIN, A_KID), (clients[1], B_MAIN, B_KID)):
        version = _spawn_family(client, main)
        assert version > 0
        assert [(c["target"], c["lastSeen"]) for c in client.cursors(watcher=main)] == [(kid, version)]
        assert client.get_session(kid)["activeRunId"] == "run-1"


def test_another_agents_ids_disclose_nothing(clients: tuple[GatewayClient, GatewayClient]) -> None:
    a, b = clients
    _spawn_family(a, A_MAIN)
    _spawn_family(b, B_MAIN)
    b_sid, a_sid = b.get_session(B_KID)["sessionId"], a.get_session(A_KID)["sessionId"]
    theirs = b.inbound(B_KID, "b's person typed", channel="telegram", dedupe_key="tg-1001")["event"]
    mine = a.inbound(A_KID, "a's person typed", channel="telegram", dedupe_key="tg-1001")
    assert mine["recorded"] is True and mine["event"]["sequence"] != theirs["sequence"]
    assert (mine["event"]["sessionKey"], mine["event"]["agentId"], mine["event"]["sessionId"]) == (A_KID, "a", a_sid)
    _says_nothing_of_b(mine, b_sid)
    b.record_compaction(B_KID, "op-7")
    compaction = a.record_compaction(A_KID, "op-7")
    assert compaction["recorded"] is True and compaction["event"]["sessionKey"] == A_KID
    _says_nothing_of_b(compaction, b_sid)
    # a's retries answer with a's own events
    assert a.inbound(A_KID, "again", channel="telegram", dedupe_key="tg-1001")["event"] == mine["event"]
    assert a.record_compaction(A_KID, "op-7")["event"] == compaction["event"]


def test_an_id_claimed_by_another_agent_suppresses_nothing(clients: tuple[GatewayClient, GatewayClient]) -> None:
    a, b = clients
    _spawn_family(a, A_MAIN)
    seed = _spawn_family(b, B_MAIN)
    # a claims the chat id b's next person turn will carry, and ends its own run-1 first
    a.inbound(A_KID, "claim", channel="telegram", dedupe_key="tg-2002")
    assert a.end_run(A_KID, "run-1", "ok")["recorded"] is True
    # a client key spelled like the key of a run end claims nothing either
    a.inbound(A_KID, "claim", channel="telegram", dedupe_key=f"run-terminal:{B_KID} run-1")
    turn = b.inbound(B_KID, "b's person typed", channel="telegram", dedupe_key="tg-2002")
    assert turn["recorded"] is True
    assert (turn["event"]["sessionKey"], turn["event"]["agentId"]) == (B_KID, "b")
    # b's watcher is told
    queued = b.peek_system_events(B_MAIN)
    assert [e["contextKey"] for e in queued] == ["session-state:" + B_KID.encode().hex()]
    assert f'"{B_KID}" changed' in queued[0]["text"]
    # b's run fails, and b's parent sees it
    ended = b.end_run(B_KID, "run-1", "error")
    assert ended["recorded"] is True and ended["event"]["kind"] == "run_failed"
    status = b.call_tool("session_status", {"sessionKey": B_KID, "changesSince": seed}, caller=B_MAIN)
    changes = status["stateChanges"]["events"]
    assert [(e["kind"], e.get("payload")) for e in changes] == [
        ("human_direct_message", None),
        ("run_failed", {"outcome": "error"}),
    ]
