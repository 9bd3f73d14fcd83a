"""Bearer tokens and agent-scoped reads: the token table and the scope the tool layer enforces."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from sessionwatch import Gateway
from sessionwatch.errors import InvalidArgument, NotFound
from sessionwatch.tokens import create_token, revoke_token, token_id_of, verify

from .helpers import err, ok
from .suite import SuiteBase


class TokenTests(SuiteBase):
    """Bearer tokens and agent-scoped reads: the token table and the scope the tool layer enforces."""

    def test_a_token_is_stored_hashed_and_verifies_until_revoked(self, gw: Gateway) -> None:
        text, row = create_token(gw.store, agents=["ops", "dev", "ops"], name="team", now=1000)
        assert row.agents == ("ops", "dev")  # order kept, duplicates dropped
        stored = gw.store.get_token(row.token_id)
        assert stored is not None and stored.token_hash == hashlib.sha256(text.encode()).hexdigest()
        assert text not in repr(stored) and stored.name == "team" and not stored.admin and stored.created_at == 1000
        assert token_id_of(text) == row.token_id
        principal = verify(gw.store.get_token(row.token_id), text)
        assert principal is not None and not principal.admin and principal.agents == {"ops", "dev"}
        assert verify(stored, text[:-1] + ("A" if text[-1] != "A" else "B")) is None  # one character off
        assert revoke_token(gw.store, row.token_id, now=2000) is True
        assert revoke_token(gw.store, row.token_id, now=3000) is False  # already revoked: the first stamp stays
        after = gw.store.get_token(row.token_id)
        assert after is not None and after.revoked_at == 2000
        assert verify(after, text) is None
        assert after.to_json() == {
            "id": row.token_id,
            "name": "team",
            "agents": ["ops", "dev"],
            "admin": False,
            "createdAt": 1000,
            "revokedAt": 2000,
            "revoked": True,
        }

    def test_token_list_and_admin_tokens(self, gw: Gateway) -> None:
        assert gw.store.tokens() == []
        _, first = create_token(gw.store, agents=["ops"], now=10)
        admin_text, admin = create_token(gw.store, admin=True, name="oncall", now=20)
        assert [t.token_id for t in gw.store.tokens()] == [first.token_id, admin.token_id]
        principal = verify(gw.store.get_token(admin.token_id), admin_text)
        assert principal is not None and principal.admin
        assert gw.store.get_token("000000000000") is None
        with pytest.raises(NotFound):
            revoke_token(gw.store, "000000000000")

    @pytest.mark.parametrize(
        "kwargs",
        [
            {},
            {"agents": ["ops"], "admin": True},
            {"agents": ["a:b"]},
            {"agents": [""]},
            {"agents": ["ops"], "name": " "},
        ],
    )
    def test_bad_token_requests_change_nothing(self, gw: Gateway, kwargs: dict[str, Any]) -> None:
        with pytest.raises(InvalidArgument):
            create_token(gw.store, **kwargs)
        assert gw.store.tokens() == []

    def test_scoped_reads_of_the_log_and_the_session_list(self, gw: Gateway) -> None:
        for key in ("agent:ops:main", "agent:dev:main", "agent:qa:main"):
            gw.put_session(key)
        for i in range(3):
            for key in ("agent:ops:main", "agent:dev:main", "agent:qa:main"):
                gw.record_compaction(key, f"op-{i}-{key}")
        everything = gw.events_after(0, 1000)
        ops = gw.events_after(0, 1000, agents=frozenset({"ops"}))
        assert [e["sequence"] for e in ops] == [e["sequence"] for e in everything if e["agentId"] == "ops"]
        # the limit counts the token's own events, so a tail never stalls behind other agents' events
        two = gw.events_after(0, 2, agents=frozenset({"ops", "qa"}))
        assert [e["agentId"] for e in two] == ["ops", "qa"]
        assert gw.events_after(0, 1000, agents=frozenset()) == []
        listed = gw.list_sessions(agents=frozenset({"dev", "qa"}), limit=50)
        assert {r.session_key for r in listed} == {"agent:dev:main", "agent:qa:main"}

    def test_tool_scope_limits_caller_and_targets(self, gw: Gateway) -> None:
        for key in ("agent:ops:main", "agent:dev:main"):
            gw.put_session(key)
        ops = frozenset({"ops"})
        both = frozenset({"ops", "dev"})
        send = {"sessionKey": "agent:dev:main", "message": "hello"}
        err(gw.call_tool("sessions_send", send, caller="agent:ops:main", scope=ops), "forbidden")
        err(gw.call_tool("session_status", {}, caller="agent:dev:main", scope=ops), "forbidden")
        err(gw.call_tool("sessions_spawn", {"agentId": "dev"}, caller="agent:ops:main", scope=ops), "forbidden")
        assert gw.store.messages("agent:dev:main", "dev", 10) == []  # refused: nothing was written
        assert gw.list_sessions(limit=50, agents=frozenset({"ops"}))[0].session_key == "agent:ops:main"
        ok(gw.call_tool("sessions_send", send, caller="agent:ops:main", scope=both))
        listed = ok(gw.call_tool("sessions_list", {}, caller="agent:ops:main", scope=ops))["sessions"]
        assert [s["sessionKey"] for s in listed] == ["agent:ops:main"]
        ok(gw.call_tool("sessions_spawn", {"label": "kid"}, caller="agent:ops:main", scope=ops))
