"""Numbers at the edge of 64 bits and blank channels, on every backend (issue 8, items 7 and 8)."""

from __future__ import annotations

import logging

import pytest

from sessionwatch import Gateway, InvalidArgument

from .helpers import CHILD, MAIN, err, log, ok, status
from .suite import SuiteBase

MAX = 2**63 - 1


class EdgeInputTests(SuiteBase):
    """Numbers at the edge of 64 bits and blank channels, on every backend (issue 8, items 7 and 8)."""

    @pytest.mark.parametrize("since", [2**63, 2**64 + 5, 10**30])
    def test_changes_since_beyond_64_bits_is_invalid_argument(
        self, family: Gateway, since: int, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.WARNING)
        res = family.call_tool("session_status", {"sessionKey": CHILD, "changesSince": since}, caller=MAIN)
        assert "2^63" in err(res, "invalid_argument") or str(MAX) in res["error"]["message"]
        with pytest.raises(InvalidArgument):
            family.changes_since(CHILD, since)
        with pytest.raises(InvalidArgument):
            family.events_after(since)
        # Refused up front: the store never saw it, so nothing was logged as a failed read.
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []

    def test_the_largest_sequence_is_a_valid_empty_page(self, family: Gateway) -> None:
        page = status(family, MAIN, CHILD, since=MAX)["stateChanges"]
        assert page["events"] == [] and page["truncated"] is False
        assert family.events_after(MAX) == []

    def test_a_blank_channel_is_a_human_message_via_unknown(self, family: Gateway) -> None:
        """The channel is trimmed and an empty one reads 'unknown'; the turn is not refused."""
        for blank in ("", "   "):
            out = family.inbound(CHILD, f"typed with channel {blank!r}", channel=blank)
            assert out["recorded"] is True and out["actorType"] == "human"
            assert out["event"]["summary"] == "human message via unknown"
        assert [e["summary"] for e in log(family, CHILD) if e["kind"] == "human_direct_message"] == [
            "human message via unknown"
        ] * 2
        # The trimmed channel is what the summary names.
        assert family.inbound(CHILD, "x", channel="  webchat ")["event"]["summary"] == "human message via webchat"
        ok(family.call_tool("session_status", {"sessionKey": CHILD}, caller=MAIN))
