"""The bounded-memory path classifies exactly like the fast path, on generated rows.

Rows are generated around the fields the rules look at (any key order, duplicate keys, odd value
types, escapes, non-ASCII, surrogate pairs, whitespace) and some are then damaged; the streaming
parser, fed in random pieces with its state round-tripped through JSON, must agree with orjson + the
dict classifier on every one.
"""

from __future__ import annotations

import json
import random

import orjson
from hypothesis import HealthCheck, given, settings, strategies as st

from sessionwatch.hosts.claude_code.stream import ClaudeReducer
from sessionwatch.hosts.claude_code.transcripts import RULES as CLAUDE
from sessionwatch.hosts.codex.transcripts import RULES as CODEX
from sessionwatch.hosts.transcripts.jsonstream import JsonStream
from sessionwatch.hosts.transcripts.normalize import digest_text
from sessionwatch.hosts.transcripts.rows import RowRules
from sessionwatch.hosts.transcripts.verdict import PERSON, PROGRAM, UNATTRIBUTED, RowFact, Verdict

TEXT = st.text(
    alphabet=st.sampled_from(list('ab yz\n\t\u00a0\u2003é\U0001f600"\\/<>[]{}:,\x01')), max_size=30
) | st.sampled_from(
    [
        "",
        " ",
        "[Inter-session message] hi",
        "user",
        "text",
        "tool_result",
        "Continue this conversation using the OpenClaw transcript below as prior session history. "
        "<conversation_history>x</conversation_history><next_user_message>y</next_user_message>",
    ]
)
SCALAR = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
TRUTHY = st.none() | st.booleans() | st.sampled_from([0, 1, "", "x", {}, [], 0.0, -1.5])


def any_value(depth: int = 2):
    if depth == 0:
        return SCALAR
    return (
        SCALAR
        | st.lists(any_value(depth - 1), max_size=3)
        | st.dictionaries(st.sampled_from(["type", "text", "a", "content"]), any_value(depth - 1), max_size=3)
    )


def pairs(fields: dict) -> st.SearchStrategy[list[tuple[str, object]]]:
    """Some of the given fields, shuffled, sometimes duplicated (the last one wins)."""
    items = [st.tuples(st.just(k), v) for k, v in fields.items()]
    return st.lists(st.one_of(*items), max_size=len(items) + 2)


def obj(p: list[tuple[str, object]]) -> str:
    return "{" + ",".join(json.dumps(k) + ":" + (v if isinstance(v, RawJson) else json.dumps(v)) for k, v in p) + "}"


class RawJson(str):
    pass


def raw(s: st.SearchStrategy[list[tuple[str, object]]]) -> st.SearchStrategy[RawJson]:
    return s.map(lambda p: RawJson(obj(p)))


BLOCK = raw(
    pairs(
        {
            "type": st.sampled_from(["text", "tool_result", "image", "Text"]) | SCALAR,
            "text": TEXT | SCALAR,
            "content": any_value(1),
        }
    )
)
TEXT_BLOCK = raw(st.tuples(st.just(("type", "text")), st.tuples(st.just("text"), TEXT)).flatmap(st.permutations))
CONTENT = (
    TEXT | st.lists(TEXT_BLOCK | BLOCK, max_size=4).map(lambda bs: RawJson("[" + ",".join(bs) + "]")) | any_value(1)
)


def row(base: dict, noise: dict) -> st.SearchStrategy[RawJson]:
    """Mostly the base fields (a would-be prompt), plus noise fields, in any order."""
    strict = [st.tuples(st.just(k), v) for k, v in base.items()]
    return (
        st.tuples(st.tuples(*strict), pairs(noise))
        .flatmap(lambda t: st.permutations(list(t[0]) + t[1]))
        .map(lambda p: RawJson(obj(p)))
    )


MESSAGE = row(
    {"role": st.just("user"), "content": CONTENT},
    {"role": st.sampled_from(["user", "assistant"]) | SCALAR, "content": CONTENT},
)
CLAUDE_ROW = row(
    {"type": st.just("user"), "message": MESSAGE},
    {
        "type": st.sampled_from(["user", "assistant", "system"]) | SCALAR,
        "message": MESSAGE | SCALAR,
        "isMeta": TRUTHY,
        "isSidechain": TRUTHY,
        "isCompactSummary": TRUTHY,
        "isVisibleInTranscriptOnly": TRUTHY,
        "promptSource": st.sampled_from(["typed", "queued", "sdk", "system", "other"]) | SCALAR,
        "timestamp": st.sampled_from(["2027-01-15T07:00:01.000Z"]) | SCALAR,
        "uuid": TEXT,
        "toolUseResult": any_value(2),
    },
)
PART = raw(pairs({"type": st.sampled_from(["text", "image"]) | SCALAR, "text": TEXT | SCALAR}))
TEXT_PART = raw(st.tuples(st.just(("type", "text")), st.tuples(st.just("text"), TEXT)).flatmap(st.permutations))
PARTS = st.lists(TEXT_PART | PART, max_size=4).map(lambda ps: RawJson("[" + ",".join(ps) + "]"))
ITEM = row(
    {"type": st.just("UserMessage"), "content": PARTS},
    {"type": st.sampled_from(["UserMessage", "AgentMessage"]) | SCALAR, "id": TEXT, "content": PARTS | SCALAR},
)
PAYLOAD = row(
    {"type": st.sampled_from(["user_message", "item_completed"])},
    {
        "type": st.sampled_from(["user_message", "item_completed", "agent_message"]) | SCALAR,
        "message": TEXT | SCALAR,
        "kind": st.sampled_from(["plain", "environment_context"]) | SCALAR,
        "item": ITEM | SCALAR,
        "images": any_value(1),
    },
)


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` three times in four (a plain ``|`` weighs every branch of ``odd`` like ``usual``)."""
    return st.integers(0, 3).flatmap(lambda i: usual if i else odd)


# The context rows: who starts a turn (task_started) and whether a subagent runs the thread (session_meta).
ATTRIBUTION = row(
    {"turn_trigger": st.sampled_from(["user", "exec", "queue"]) | st.none()},
    {"turn_trigger": st.sampled_from(["user", "exec"]) | SCALAR, "turn_id": TEXT, "parent_turn_id": SCALAR},
)
TURN_PAYLOAD = row(
    {"type": st.just("task_started"), "turn_attribution": mostly(ATTRIBUTION, SCALAR)},
    {
        "type": st.sampled_from(["task_started", "task_complete"]) | SCALAR,
        "turn_attribution": mostly(ATTRIBUTION, SCALAR | any_value(1)),
        "turn_id": TEXT,
    },
)
SOURCE = raw(pairs({"subagent": any_value(1), "thread_spawn": any_value(1), "type": SCALAR})) | st.sampled_from(
    ["cli", "exec", "vscode", "subagent"]
)
META_PAYLOAD = row(
    {"id": TEXT, "thread_source": mostly(st.sampled_from(["user", "subagent"]), SCALAR)},
    {
        "thread_source": mostly(st.sampled_from(["user", "subagent"]), SCALAR),
        "source": SOURCE | SCALAR | st.lists(st.just("subagent"), max_size=2),
        "cwd": TEXT,
    },
)
CODEX_ROW = row(
    {"type": st.just("event_msg"), "payload": PAYLOAD},
    {
        "type": st.sampled_from(["event_msg", "response_item"]) | SCALAR,
        "payload": PAYLOAD | SCALAR,
        "timestamp": st.sampled_from(["2027-01-15T07:00:01.000Z"]) | SCALAR,
    },
)
CODEX_CONTEXT_ROW = row(
    {"type": st.sampled_from(["event_msg", "session_meta"]), "payload": TURN_PAYLOAD | META_PAYLOAD},
    {
        "type": st.sampled_from(["event_msg", "session_meta", "response_item"]) | SCALAR,
        "payload": TURN_PAYLOAD | META_PAYLOAD | SCALAR,
        "timestamp": SCALAR,
    },
)


def damage(line: bytes, how: int, where: int) -> bytes:
    if how == 0 or not line:
        return line
    pos = where % (len(line) + 1)
    if how == 1:
        return line[:pos]  # cut off
    if how == 2:
        return line[:pos] + b"\xff" + line[pos:]  # invalid UTF-8
    if how == 3:
        return line[:pos] + b"," + line[pos:]
    if how == 4:
        return b"  " + line + b" \r"  # JSON whitespace around
    return line.replace(b"\\ud83d", b"\\udead", 1)


def agree(rules: RowRules, line: bytes, seed: int) -> None:
    full = rules.classify_head(line)  # parsed whatever its bytes, as a file's first row is
    fast = rules.classify(line)  # behind the byte pre-filter
    # the pre-filter is exact: it drops only rows that are neither a prompt nor a turn's start (a
    # session_meta counts only as a file's first row)
    head_only = full.fact is not None and full.fact.subagent is not None
    assert fast == full or (head_only and fast == Verdict(False)), (line, fast, full)
    fast = full
    rnd = random.Random(seed)
    state = None
    i = 0
    while i < len(line):
        step = rnd.choice([1, 2, 3, 7, 64, 4096])
        s = rules.stream(state)
        s.feed(line[i : i + step])
        state = json.loads(json.dumps(s.to_state()))
        i += step
    slow = rules.stream(state).finish()
    assert slow.human == fast.human, (line, fast, slow)
    assert slow.fact == fast.fact, (line, fast, slow)
    if fast.human:
        assert slow.timestamp == fast.timestamp
        if fast.text is not None:
            assert slow.text_digest == digest_text(fast.text)
        if fast.parts is not None:
            nonempty = [p for p in fast.parts if p]
            assert slow.joined_digest == digest_text(" ".join(nonempty))
            assert slow.part_digests == [digest_text(p) for p in nonempty]


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(CLAUDE_ROW, st.integers(0, 5), st.integers(0, 10**6), st.booleans(), st.integers(0, 2**32))
def test_claude_streaming_agrees(row, how, where, ascii_only, seed):
    line = json.dumps(json.loads(row)).encode() if ascii_only else row.encode()  # \u escapes everywhere
    agree(CLAUDE, damage(line, how, where), seed)


@SETTINGS
@given(CODEX_ROW, st.integers(0, 5), st.integers(0, 10**6), st.integers(0, 2**32))
def test_codex_streaming_agrees(row, how, where, seed):
    agree(CODEX, damage(row.encode(), how, where), seed)


@SETTINGS
@given(CODEX_CONTEXT_ROW, st.integers(0, 5), st.integers(0, 10**6), st.booleans(), st.integers(0, 2**32))
def test_codex_context_rows_agree(row, how, where, ascii_only, seed):
    line = json.dumps(json.loads(row)).encode() if ascii_only else row.encode()  # \u escapes everywhere
    agree(CODEX, damage(line, how, where), seed)


def test_codex_context_rows_say_who_starts_a_turn_and_whether_a_subagent_runs_the_thread():
    def fact(row: dict) -> object:
        line = json.dumps(row).encode()
        agree(CODEX, line, 7)
        return CODEX.classify_head(line).fact

    def turn(attribution: object) -> dict:
        return {"type": "event_msg", "payload": {"type": "task_started", "turn_attribution": attribution}}

    assert fact(turn({"turn_trigger": "user"})) == RowFact(turn=PERSON)
    for trigger in ("exec", "queue", None, "agent"):
        assert fact(turn({"turn_trigger": trigger})) == RowFact(turn=PROGRAM)
    assert fact(turn({})) == RowFact(turn=PROGRAM)  # attributed, but not to a person
    assert fact(turn(None)) == RowFact(turn=UNATTRIBUTED)  # older builds: no attribution at all
    assert fact({"type": "event_msg", "payload": {"type": "task_started"}}) == RowFact(turn=UNATTRIBUTED)
    meta = {"type": "session_meta", "payload": {"id": "t", "source": "exec", "thread_source": "user"}}
    assert fact(meta) == RowFact(subagent=False)
    meta["payload"]["thread_source"] = "subagent"
    assert fact(meta) == RowFact(subagent=True)
    meta["payload"] = {"id": "t", "source": {"subagent": {"thread_spawn": {"depth": 1}}}}  # no thread_source
    assert fact(meta) == RowFact(subagent=True)


def test_validity_matches_orjson_on_edge_cases():
    cases = [
        b'{"a":1}',
        b"[1,]",
        b'{"a" 1}',
        b"[01]",
        b"[1.]",
        b"[.5]",
        b"[1e]",
        b"[1e+2]",
        b"[-0]",
        b"[1e400]",
        b"[" + b"1" * 400 + b"]",
        b"NaN",
        b"[tru]",
        b"[true1]",
        b"[nul]",
        b'"\\u00e9"',
        b'"\\U0041"',
        b'"\\x41"',
        b'"\\ud83d\\ude00"',
        b'"\\ude00"',
        b'"\\ud83d"',
        b'"\\ud83dx"',
        b'"a\x01"',
        b'"\x7f"',
        b'"\xed\xa0\x80"',
        b'"\xc0\xaf"',
        b"\xef\xbb\xbf{}",
        b"{} {}",
        b"  {}  ",
        b"{}\r",
        b'{"a":[1,{"b":null}]}',
        b"[" * 1024 + b"]" * 1024,
        b"[" * 1025 + b"]" * 1025,
        b"",
        b"   ",
        b"{",
        b"}",
        b'{"a":1,}',
        b'{,"a":1}',
        b"[,1]",
    ]
    for line in cases:
        try:
            orjson.loads(line)
            valid = True
        except orjson.JSONDecodeError:
            valid = False
        for step in (1, 3, 1 << 20):
            p = JsonStream(ClaudeReducer())
            for i in range(0, len(line), step):
                p.feed(line[i : i + step])
            assert p.finish() == valid, (line, step)


def test_streaming_state_stays_small_for_a_huge_row():
    text = "word " * 400_000  # 2 MB of prompt
    line = json.dumps(
        {
            "type": "user",
            "message": {"role": "user", "content": text},
            "promptSource": "typed",
            "timestamp": "2027-01-15T07:00:01.000Z",
        }
    ).encode()
    s = CLAUDE.stream()
    biggest = 0
    for i in range(0, len(line), 1 << 16):
        s.feed(line[i : i + (1 << 16)])
        biggest = max(biggest, len(json.dumps(s.to_state())))
    v = s.finish()
    assert v.human and v.text_digest == digest_text(" ".join(text.split()))
    assert biggest < 4096


def test_verdict_is_not_human_for_non_objects():
    for line in (b"[]", b'"user"', b"1", b"null"):
        assert CLAUDE.classify(line) == Verdict(False) and CODEX.classify(line) == Verdict(False)


def test_a_long_string_kind_is_still_some_other_kind():
    line = json.dumps(
        {"type": "event_msg", "payload": {"type": "user_message", "message": "m", "kind": "k" * 100}}
    ).encode()
    assert CODEX.classify(line).human is False
    agree(CODEX, line, 1)
