"""Session keys: parsing, validation with clear errors, and the derived predicates."""

from __future__ import annotations

import pytest

from sessionwatch.errors import InvalidArgument
from sessionwatch.keys import (
    agent_of,
    check_agent_id,
    infer_kind,
    is_agent_qualified,
    is_subagent_key,
    main_key,
    parse_key,
    shown,
    shown_text,
)


@pytest.mark.parametrize(
    ("raw", "agent", "rest"),
    [
        ("agent:main:main", "main", "main"),
        ("agent:ops:telegram:group:room-1", "ops", "telegram:group:room-1"),
        ("agent:main:subagent:child", "main", "subagent:child"),
        ("agent:a:subagent:child:subagent:grandchild", "a", "subagent:child:subagent:grandchild"),
        ("agent:x:dashboard:8a3f2c1e-uuid", "x", "dashboard:8a3f2c1e-uuid"),
        ("agent:日本:チャット", "日本", "チャット"),
    ],
)
def test_agent_qualified_keys_parse_into_agent_and_rest(raw: str, agent: str, rest: str) -> None:
    key = parse_key(raw)
    assert (key.raw, key.agent_id, key.rest) == (raw, agent, rest)
    assert key.qualified and is_agent_qualified(raw)
    assert agent_of(raw) == agent


def test_bare_global_is_valid_but_not_agent_qualified() -> None:
    key = parse_key("global")
    assert (key.raw, key.agent_id, key.rest) == ("global", None, None)
    assert not key.qualified and not is_agent_qualified("global")
    assert agent_of("global") is None
    assert not key.is_subagent


@pytest.mark.parametrize(
    ("raw", "subagent"),
    [
        ("agent:main:subagent:child", True),
        ("agent:main:SubAgent:child", True),  # case-insensitive prefix
        ("agent:main:main", False),
        ("agent:main:subagentish:x", False),
        ("agent:main:telegram:subagent:x", False),  # only the start of rest counts
        ("global", False),
    ],
)
def test_subagent_keys(raw: str, subagent: bool) -> None:
    assert parse_key(raw).is_subagent is subagent
    assert is_subagent_key(raw) is subagent


def test_main_key_of_an_agent() -> None:
    assert main_key("ops") == "agent:ops:main"
    assert infer_kind(parse_key(main_key("ops"))) == "main"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("agent:a:main", "main"),
        ("global", "main"),
        ("agent:a:subagent:c", "subagent"),
        ("agent:a:telegram:group:g1", "group"),
        ("agent:a:discord:channel:c1", "group"),
        ("agent:a:matrix:room:r1", "group"),
        ("agent:a:cron:nightly", "cron"),
        ("agent:a:telegram:direct:u1", "direct"),
        ("agent:a:dm:u1", "direct"),
        ("agent:a:dashboard:x", "other"),
    ],
)
def test_kind_is_inferred_from_the_key(raw: str, kind: str) -> None:
    assert infer_kind(parse_key(raw)) == kind


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "must not be empty"),
        ("agent::main", "empty ':'-separated part"),
        ("agent:a:", "empty ':'-separated part"),
        (":agent:a:main", "empty ':'-separated part"),
        ("agent:a::x", "empty ':'-separated part"),
        ("agent:a", "expected 'agent:<agentId>:<rest>'"),
        ("agent", "expected 'agent:<agentId>:<rest>'"),
        ("main", "expected 'agent:<agentId>:<rest>'"),
        ("Global", "expected 'agent:<agentId>:<rest>'"),
        ("session:a:main", "expected 'agent:<agentId>:<rest>'"),
        ("Agent:a:main", "expected 'agent:<agentId>:<rest>'"),
        ("agent:a:main x", "whitespace or control"),
        (" agent:a:main", "whitespace or control"),
        ("agent:a:main\n", "whitespace or control"),
        ("agent:a:ma\tin", "whitespace or control"),
        ("agent:a:ma\x00in", "whitespace or control"),
        ("agent:a:ma\x1bin", "whitespace or control"),
        ("agent:a:ma\x7fin", "whitespace or control"),
        ("agent:a:ma\u00a0in", "whitespace or control"),  # no-break space
        ("agent:a:" + "x" * 505, "longer than 512"),
        (None, "must be a string, got NoneType"),
        (7, "must be a string, got int"),
        (b"agent:a:main", "must be a string, got bytes"),
        (["agent:a:main"], "must be a string, got list"),
        ({"key": "agent:a:main"}, "must be a string, got dict"),
    ],
)
def test_malformed_keys_are_refused_with_a_clear_reason(value: object, reason: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_key(value, "sessionKey")
    assert info.value.code == "invalid_argument"
    assert reason in info.value.message
    assert info.value.message.startswith("sessionKey")


def test_the_length_limit_is_512_characters_inclusive() -> None:
    ok = "agent:a:" + "x" * (512 - len("agent:a:"))
    assert len(ok) == 512
    assert parse_key(ok).raw == ok
    with pytest.raises(InvalidArgument):
        parse_key(ok + "x")


def test_the_error_names_the_argument() -> None:
    with pytest.raises(InvalidArgument, match="^watcher "):
        parse_key("nope", "watcher")


def test_is_agent_qualified_never_raises_on_junk() -> None:
    for raw in ("", "agent", "agent:a", "agent::x", "global", "agent:a:"):
        assert is_agent_qualified(raw) is False


@pytest.mark.parametrize("value", ["", "a:b", "a b", "x" * 201, None, 3, "a\x00"])
def test_agent_ids_are_checked(value: object) -> None:
    with pytest.raises(InvalidArgument):
        check_agent_id(value)


def test_valid_agent_id() -> None:
    assert check_agent_id("ops-1") == "ops-1"
    assert check_agent_id("x" * 200) == "x" * 200


# -- characters that hide or reorder words (issue 19, item 5) -------------------------------------------
HIDING = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b"]
C1 = [chr(c) for c in range(0x80, 0xA0) if not chr(c).isspace()]  # U+0085 is whitespace, refused as such


@pytest.mark.parametrize("ch", HIDING + C1)
def test_bidi_controls_zero_width_space_and_c1_controls_are_refused(ch: str) -> None:
    for value in (f"agent:a:x{ch}y", f"agent:a{ch}:main", f"{ch}agent:a:main"):
        with pytest.raises(InvalidArgument) as info:
            parse_key(value, "sessionKey")
        assert info.value.code == "invalid_argument"
        assert f"U+{ord(ch):04X}" in info.value.message and "reorder" in info.value.message
        assert ch not in info.value.message  # shown escaped in the error too
    with pytest.raises(InvalidArgument):
        check_agent_id(f"ops{ch}")


@pytest.mark.parametrize(
    "raw",
    [
        "agent:a:café",
        "agent:日本:チャット",
        "agent:a:🚀",
        "agent:a:👩\u200d💻",  # ZWJ sequence
        "agent:a:🇫🇷",
        "agent:a:\ufeffx",
        "agent:\ufeffa:main",
        "agent:a:שלום",
        "agent:a:x\u200cy",  # zero-width non-joiner: part of Persian and Indic spelling
    ],
)
def test_other_non_ascii_keys_v1_accepts_stay_valid_and_are_shown_as_they_are(raw: str) -> None:
    key = parse_key(raw)
    assert key.raw == raw
    assert shown(raw) is raw  # not even a copy: byte for byte
    with pytest.raises(InvalidArgument):  # the line runs exactly between the two
        parse_key(raw + "\u2069")


def test_a_stored_key_with_such_characters_is_found_and_shown_escaped() -> None:
    legacy = "agent:a:evil\u202etxt.exe\u200b\x9b"
    assert parse_key(legacy, stored=True).raw == legacy
    with pytest.raises(InvalidArgument):
        parse_key(legacy)
    assert shown(legacy) == "agent:a:evil\\u202etxt.exe\\u200b\\u009b"
    assert shown("agent:a:x\u0085\u2028\ty") == "agent:a:x\\u0085\\u2028\\u0009y"
    with pytest.raises(InvalidArgument, match="whitespace or control"):
        parse_key("agent:a:x\ny", stored=True)  # v1 never stored those


def test_shown_text_keeps_json_decoding_to_the_same_values() -> None:
    import json

    block = json.dumps({"k": "a\u202eb\u2028c\\\u200bd", "n": 1}, ensure_ascii=False)
    safe = shown_text(block)
    assert not any(c in safe for c in "\u202e\u2028\u200b")
    assert json.loads(safe) == json.loads(block)
    assert shown_text('{"k": "café 🚀"}') == '{"k": "café 🚀"}'
