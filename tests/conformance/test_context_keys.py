"""The context-key codec twice: notices.py (context_key_for, target_from_context_key) and its twins in
postgres_functions.sql (sw_context_key, sw_target_of_context_key), with which sw_drain and sw_sweep
render and decode keys in the server instead of a second round trip through Python. They must agree on
every key, the ones decoding refuses included (fail closed, never an error)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sessionwatch.notices import context_key_for, target_from_context_key
from tests.support import pg

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not pg.available(), reason="PostgreSQL is not reachable")]

TARGETS = [
    "agent:a:main",
    "global",
    "agent:é:ünïcode",
    "agent:中文:会话",
    "agent:a:🦀 crab",
    "agent:a:e\u0301 combining",
    "agent:a:" + "x" * 504,
    " ",
]

_WS = " \t\n\r\x0b\x0c"  # what bytes.fromhex skips (ASCII whitespace)

# (what, key): decoding must give exactly what Python gives
KEYS = [
    ("lower hex", "session-state:" + b"agent:a:main".hex()),
    ("upper hex", "session-state:" + b"agent:a:main".hex().upper()),
    ("mixed hex", "session-state:C3a9"),
    ("upper prefix", "SESSION-STATE:61"),
    ("mixed prefix", "Session-State:61"),
    ("non-ASCII target", "session-state:" + "agent:中文:🦀".encode().hex()),
    ("empty payload", "session-state:"),
    ("odd length", "session-state:616"),
    ("odd length with whitespace", "session-state: 61 62 "),
    ("leading whitespace", "session-state: 61 62"),
    ("not hex", "session-state:zz"),
    ("one hex digit then junk", "session-state:6g"),
    ("whitespace between pairs", "session-state: 61\t62"),
    ("whitespace after", "session-state:6162  "),
    ("vertical tab and form feed", "session-state:\x0b61\x0c62"),
    ("whitespace inside a pair", "session-state:6 16"),
    ("non-ASCII whitespace", "session-state:\xa061"),
    ("invalid UTF-8", "session-state:ff"),
    ("overlong", "session-state:c0af"),
    ("surrogate", "session-state:eda080"),
    ("beyond U+10FFFF", "session-state:f4908080"),
    ("truncated sequence", "session-state:e282"),
    ("lone continuation byte", "session-state:80"),
    ("wrong prefix", "session-stat:61"),
    ("prefix not at the start", "xsession-state:61"),
    ("underscore prefix", "session_state:61"),
    ("dotted capital I in the prefix", "SESS\u0130ON-STATE:61"),
    ("Kelvin sign", "\u212a"),
    ("empty", ""),
    ("prefix only, short", "session-state"),
]


@pytest.fixture(scope="module")
def conn() -> Iterator[Any]:
    import psycopg

    from sessionwatch.store.postgres import apply_migrations

    with pg.fresh_database() as url:
        apply_migrations(url)  # this checkout's functions, whatever the template holds
        with psycopg.connect(url, autocommit=True) as c:
            yield c


def _sql(conn: Any, function: str, values: list[str]) -> list[str | None]:
    rows = conn.execute(
        f"SELECT {function}(v) FROM unnest(%s::text[]) WITH ORDINALITY u(v, n) ORDER BY n", (values,)
    ).fetchall()
    return [r[0] for r in rows]


def test_sql_renders_context_keys_as_python_does(conn: Any) -> None:
    assert _sql(conn, "sw_context_key", TARGETS) == [context_key_for(t) for t in TARGETS]
    assert _sql(conn, "sw_target_of_context_key", [context_key_for(t) for t in TARGETS]) == TARGETS


def test_sql_decodes_context_keys_as_python_does(conn: Any) -> None:
    got = dict(zip([w for w, _ in KEYS], _sql(conn, "sw_target_of_context_key", [k for _, k in KEYS]), strict=True))
    assert got == {w: target_from_context_key(k) for w, k in KEYS}
    # the cases mean what they say
    assert got["upper hex"] == "agent:a:main" and got["whitespace after"] == "ab" and got["invalid UTF-8"] is None
    assert conn.execute("SELECT sw_target_of_context_key(NULL)").fetchone()[0] is None


def test_a_nul_byte_decodes_to_null_in_sql_only(conn: Any) -> None:
    """The one difference: a PostgreSQL text cannot hold NUL, so SQL refuses what Python decodes to a
    target no session key can be (nothing to acknowledge either way)."""
    key = "session-state:" + b"a\x00b".hex()
    assert target_from_context_key(key) == "a\x00b"
    assert _sql(conn, "sw_target_of_context_key", [key]) == [None]


_TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=40)
_PAYLOAD = st.lists(
    st.one_of(
        st.sampled_from(list("0123456789abcdefABCDEF")),
        st.sampled_from(list(_WS)),
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
    ),
    max_size=16,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=_TEXT,
    prefix=st.sampled_from(["session-state:", "SESSION-STATE:", "sEssIon-sTate:", "session-state", "other:", ""]),
    payload=_PAYLOAD,
    utf8=st.binary(max_size=8),
)
def test_the_codecs_agree_on_arbitrary_keys(conn: Any, target: str, prefix: str, payload: str, utf8: bytes) -> None:
    keys = [context_key_for(target), prefix + payload, prefix + utf8.hex(), prefix + utf8.hex().upper()]
    want = [target_from_context_key(k) for k in keys]
    want = [None if w is not None and "\x00" in w else w for w in want]  # see the NUL test
    assert _sql(conn, "sw_context_key", [target]) == [context_key_for(target)]
    assert _sql(conn, "sw_target_of_context_key", keys) == want
