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
