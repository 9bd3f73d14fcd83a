"""Ids belong to their agent: dedupe keys, run ids and operation ids of one agent never meet those of
another, and a key a client sends never meets a key sessionwatch builds for itself."""

from __future__ import annotations

from typing import Any

from sessionwatch import Gateway

from .helpers import cursor, human, log, marks, notice, spawn, status, texts
from .suite import SuiteBase

A_MAIN, A_KID = "agent:a:main", "agent:a:subagent:kid"
B_MAIN, B_KID = "agent:b:main", "agent:b:subagent:kid"


def _families(gw: Gateway, runs: tuple[str, str] = ("run-1", "run-1")) -> dict[str, dict[str, Any]]:
    """agent:a:main and agent:b:main each spawn their own kid (by default with the same run id)."""
    gw.put_session(A_MAIN)
    gw.put_session(B_MAIN)
    return {A_KID: spawn(gw, A_MAIN, "kid", run_id=runs[0]), B_KID: spawn(gw, B_MAIN, "kid", run_id=runs[1])}


class AgentScopeTests(SuiteBase):
    """Ids belong to their agent (and run and operation ids to their session)."""

    def test_a_dedupe_key_of_another_agent_neither_discloses_nor_suppresses(self, gw: Gateway) -> None:
        _families(gw, ("run-a", "run-b"))
        seed = marks(gw, B_MAIN, B_KID)
        assert seed is not None
        # a claims the id b's next chat message will carry (chat ids are predictable)
        claimed = human(gw, A_KID, dedupe_key="chat-42")
        assert claimed["recorded"] is True and claimed["event"]["sessionKey"] == A_KID
        # b's person turn is b's own event, and b's watcher is told
        turn = human(gw, B_KID, dedupe_key="chat-42")
        assert turn["recorded"] is True
        assert (turn["event"]["sessionKey"], turn["event"]["agentId"]) == (B_KID, "b")
        assert turn["event"]["sessionId"] == gw.get_session(B_KID)["sessionId"]
        assert turn["event"]["sequence"] > claimed["event"]["sequence"]
        assert gw.state_version(B_KID) == turn["event"]["sequence"]
        assert texts(gw, B_MAIN) == [notice(B_KID, seed[0])]
        # a's own duplicate answers with a's event only
        again = human(gw, A_KID, dedupe_key="chat-42")
        assert again["event"]["sequence"] == claimed["event"]["sequence"]
        assert again["event"]["sessionKey"] == A_KID
        assert [(e["agentId"], e["sessionKey"]) for e in log(gw) if e.get("dedupeKey") == "chat-42"] == [
            ("a", A_KID),
            ("b", B_KID),
        ]

    def test_a_duplicate_of_another_agents_key_gets_only_its_own_event(self, gw: Gateway) -> None:
        """The other order: b recorded first; a sending b's key learns nothing of b's event."""
        _families(gw, ("run-a", "run-b"))
        theirs = human(gw, B_KID, dedupe_key="chat-7")["event"]
        mine = human(gw, A_KID, dedupe_key="chat-7")
        assert mine["recorded"] is True
        assert mine["event"]["sequence"] != theirs["sequence"]
        assert (mine["event"]["sessionKey"], mine["event"]["agentId"]) == (A_KID, "a")
        assert mine["event"]["sessionId"] == gw.get_session(A_KID)["sessionId"]

    def test_operation_ids_belong_to_their_agent(self, gw: Gateway) -> None:
        for key, agent in ((A_MAIN, None), (B_MAIN, None), ("global", "a"), ("global", "b")):
            gw.put_session(key, agent_id=agent)
        theirs = gw.record_compaction(B_MAIN, "op-1")
        mine = gw.record_compaction(A_MAIN, "op-1")
        assert mine["recorded"] is True
        assert (mine["event"]["sessionKey"], mine["event"]["agentId"]) == (A_MAIN, "a")
        assert mine["event"]["sequence"] != theirs["event"]["sequence"]
        # bare 'global' keys are one key text for every agent: still two sessions, two compactions
        ga = gw.record_compaction("global", "op-1", agent_id="a")
        gb = gw.record_compaction("global", "op-1", agent_id="b")
        assert ga["recorded"] is True and gb["recorded"] is True
        assert (ga["event"]["agentId"], gb["event"]["agentId"]) == ("a", "b")
        dup = gw.record_compaction("global", "op-1", agent_id="b")
        assert dup["recorded"] is False and dup["event"]["sequence"] == gb["event"]["sequence"]
        assert gw.state_version("global", agent_id="a") == ga["event"]["sequence"]

    def test_two_agents_spawning_the_same_run_id_each_seed_their_parent(self, gw: Gateway) -> None:
        spawned = _families(gw)
        for parent, kid in ((A_MAIN, A_KID), (B_MAIN, B_KID)):
            events = log(gw, kid)
            assert [e["kind"] for e in events] == ["created", "child_spawned"], kid
            seq = events[-1]["sequence"]
            assert spawned[kid]["stateVersion"] == seq
            assert marks(gw, parent, kid) == (seq, seq, seq)
            assert gw.get_session(kid)["activeRunId"] == "run-1"

    def test_a_run_end_of_another_agent_never_suppresses_ours(self, gw: Gateway) -> None:
        _families(gw)
        seed = gw.state_version(B_KID)
        first = gw.end_run(A_KID, "run-1", "ok")
        assert first["recorded"] is True
        failed = gw.end_run(B_KID, "run-1", "error")
        assert failed["recorded"] is True and failed["wasActive"] is True
        assert (failed["event"]["sessionKey"], failed["event"]["kind"]) == (B_KID, "run_failed")
        # b's parent sees its child's run fail
        changes = status(gw, B_MAIN, B_KID, since=seed)["stateChanges"]["events"]
        assert [(e["kind"], e.get("payload")) for e in changes] == [("run_failed", {"outcome": "error"})]
        # and the first outcome per run still wins, within the agent
        assert gw.end_run(B_KID, "run-1", "ok")["recorded"] is False

    def test_run_and_operation_ids_belong_to_their_session(self, gw: Gateway) -> None:
        """Two children of one parent, both on run-1: each spawn seeds the parent, each run ends, each
        compaction op-1 is recorded."""
        gw.put_session(A_MAIN)
        spawn(gw, A_MAIN, "one", run_id="run-1")
        spawn(gw, A_MAIN, "two", run_id="run-1")
        one, two = "agent:a:subagent:one", "agent:a:subagent:two"
        for kid in (one, two):
            seq = log(gw, kid)[-1]["sequence"]
            assert log(gw, kid)[-1]["kind"] == "child_spawned"
            assert marks(gw, A_MAIN, kid) == (seq, seq, seq)
        for kid in (one, two):
            ended = gw.end_run(kid, "run-1", "timeout")
            assert ended["recorded"] is True and ended["event"]["sessionKey"] == kid
            compacted = gw.record_compaction(kid, "op-1")
            assert compacted["recorded"] is True and compacted["event"]["sessionKey"] == kid
        # the same run into the same child is still a no-op
        before = log(gw)
        spawn(gw, A_MAIN, "one", run_id="run-1")
        assert log(gw) == before

    def test_a_client_key_never_claims_a_key_sessionwatch_builds(self, gw: Gateway) -> None:
        gw.put_session(A_MAIN)
        spawn(gw, A_MAIN, "kid", run_id="run-1")
        # every key sessionwatch builds or has built for the coming events, sent first by a client
        for guess in self._internal_guesses():
            claimed = human(gw, A_KID, dedupe_key=guess)
            assert claimed["recorded"] is True and claimed["event"]["kind"] == "human_direct_message", guess
        gw.drain_system_events(A_MAIN)
        ended = gw.end_run(A_KID, "run-1", "error")
        assert ended["recorded"] is True and ended["event"]["kind"] == "run_failed"
        compacted = gw.record_compaction(A_KID, "op-1")
        assert compacted["recorded"] is True and compacted["event"]["kind"] == "compacted"
        spawn(gw, A_MAIN, "kid", run_id="run-2")
        seq = gw.state_version(A_KID)
        assert log(gw, A_KID)[-1]["kind"] == "child_spawned" and marks(gw, A_MAIN, A_KID) == (seq, seq, seq)
        made = gw.put_session("agent:a:made", created_by={"type": "human", "id": "alice"})
        assert log(gw, "agent:a:made")[-1]["kind"] == "created" and made["created"] is True
        # the other way round: a client sending the text of a key sessionwatch built gets its own event
        built = [e for e in log(gw) if e.get("dedupeKey") and e["kind"] != "human_direct_message"]
        assert [e["kind"] for e in built] == [
            "created",
            "child_spawned",
            "run_failed",
            "compacted",
            "child_spawned",
            "created",
        ]
        for e in built:
            if e["dedupeKey"] not in self._internal_guesses():  # the ones a client sent already are its own
                turn = human(gw, A_KID, dedupe_key=e["dedupeKey"])
                assert turn["recorded"] is True and turn["event"]["kind"] == "human_direct_message", e
                assert turn["event"]["sequence"] > e["sequence"]
        assert cursor(gw, A_MAIN, A_KID) is not None

    @staticmethod
    def _internal_guesses() -> list[str]:
        out = []
        for prefix, tail in (("run-terminal", "run-1"), ("compacted", "op-1"), ("child-spawned", "run-2")):
            out += [f"{prefix}:{tail}", f"{prefix}:{A_KID} {tail}", f"{prefix}:{A_KID}:{tail}"]
        return out
