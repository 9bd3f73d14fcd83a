"""Notice text (byte-exact v1), the session-state context-key codec and the System: line format."""

from __future__ import annotations

import pytest

from sessionwatch import notice_text
from sessionwatch.notices import (
    CONTEXT_PREFIX,
    context_key_for,
    format_line,
    format_timestamp,
    notice_template,
    parse_notice,
    target_from_context_key,
)


def test_notice_text_is_the_byte_exact_v1_format() -> None:
    assert notice_text("agent:main:subagent:child", 17) == (
        'Session "agent:main:subagent:child" changed (other actor). Reconcile before acting: '
        'session_status sessionKey "agent:main:subagent:child" changesSince 17.'
    )
    assert notice_text("agent:a:b", 0).endswith("changesSince 0.")
    assert notice_text("agent:a:b", 0).encode() == (
        b'Session "agent:a:b" changed (other actor). Reconcile before acting: '
        b'session_status sessionKey "agent:a:b" changesSince 0.'
    )


def test_notice_text_depends_only_on_target_and_last_seen() -> None:
    assert notice_text("agent:a:x", 5) == notice_text("agent:a:x", 5)
    assert notice_text("agent:a:x", 5) != notice_text("agent:a:x", 6)
    assert notice_text("agent:a:x", 5) != notice_text("agent:a:y", 5)
    t = notice_template("agent:a:x")
    assert t.text(5) == notice_text("agent:a:x", 5)
    assert t.context_key == context_key_for("agent:a:x")


def test_context_key_is_lowercase_hex_of_utf8() -> None:
    assert context_key_for("agent:a:b") == "session-state:" + b"agent:a:b".hex()
    assert context_key_for("agent:ä:b") == "session-state:6167656e743ac3a43a62"
    key = context_key_for("agent:Main:X")
    assert key == key.lower()


@pytest.mark.parametrize("target", ["agent:a:b", "agent:日本:チャット", "global", "agent:a:subagent:x:y"])
def test_context_key_round_trips(target: str) -> None:
    assert target_from_context_key(context_key_for(target)) == target
    # the queue lower-cases context keys; upper-case hex decodes the same
    assert target_from_context_key(CONTEXT_PREFIX + target.encode().hex().upper()) == target
    assert target_from_context_key(context_key_for(target).upper()) == target


@pytest.mark.parametrize(
    "key",
    [
        None,
        "",
        "cron:nightly",
        "session-state:",
        "session-state:zz",
        "session-state:abc",  # odd length
        "session-state:6g",
        "session-created:6167",
        "xsession-state:61",
        "session-state:ff",  # not valid UTF-8
        "session-state:c328",  # truncated multi-byte sequence
    ],
)
def test_malformed_context_keys_decode_to_nothing(key: str | None) -> None:
    assert target_from_context_key(key) is None


def test_timestamp_is_iso_utc_with_milliseconds() -> None:
    assert format_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert format_timestamp(1_800_000_000_123) == "2027-01-15T08:00:00.123Z"
    assert format_timestamp(1_800_000_000_007) == "2027-01-15T08:00:00.007Z"


def test_system_line_format_with_continuation_lines() -> None:
    assert format_line(0, "hello") == "System: [1970-01-01T00:00:00.000Z] hello"
    assert format_line(0, "one\ntwo\nthree") == ("System: [1970-01-01T00:00:00.000Z] one\nSystem: two\nSystem: three")


def test_parse_notice_recognizes_only_the_exact_notice_for_its_key() -> None:
    target = "agent:a:child"
    ctx = context_key_for(target)
    assert parse_notice(notice_text(target, 42), ctx) == (target, 42)
    assert parse_notice(notice_text(target, 0), ctx) == (target, 0)
    assert parse_notice(notice_text(target, 42), context_key_for("agent:a:other")) is None
    assert parse_notice(notice_text(target, 42), None) is None
    assert parse_notice(notice_text(target, 42) + " ", ctx) is None
    assert parse_notice(notice_text(target, 42).replace("42", "042"), ctx) is None
    assert parse_notice(notice_text(target, 42).replace("42", "-1"), ctx) is None
    assert parse_notice(notice_text(target, 42).replace("42", "٤٢"), ctx) is None  # non-ASCII digits
    assert parse_notice("something else", ctx) is None
