"""Stale-state notice text, the context-key codec and the system-event line format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from urllib.parse import quote

from .keys import shown

CONTEXT_PREFIX = "session-state:"
_URI_COMPONENT_SAFE = "!'()*"  # what encodeURIComponent leaves as it is, beyond quote()'s own


@dataclass(frozen=True, slots=True)
class NoticeTemplate:
    """The notice for one target: ``prefix + str(last_seen) + suffix``; the store fills in last_seen."""

    target: str
    prefix: str
    suffix: str
    context_key: str

    def text(self, last_seen: int) -> str:
        return f"{self.prefix}{last_seen}{self.suffix}"


def notice_template(target: str, public_url: str | None = None) -> NoticeTemplate:
    """The notice for ``target``. Without ``public_url`` it is byte-exact v1 for every valid key (a key
    stored with characters no key may hold now is escaped); with one it also names the target's page on
    the dashboard, in angle brackets so the sentence's full stop is never read as part of the address."""
    name = shown(target)
    link = "" if public_url is None else f"Open: <{dashboard_url(public_url, target)}>. "
    return NoticeTemplate(
        target=target,
        prefix=(
            f'Session "{name}" changed (other actor). {link}Reconcile before acting: '
            f'session_status sessionKey "{name}" changesSince '
        ),
        suffix=".",
        context_key=context_key_for(target),
    )


def notice_renderer(public_url: str | None) -> Callable[[str], NoticeTemplate]:
    """The ``render`` a process hands its store: v1's template, or the one linking to ``public_url``."""
    return notice_template if public_url is None else partial(notice_template, public_url=public_url)


def dashboard_url(public_url: str, target: str) -> str:
    """The dashboard page of a session: the address the dashboard itself uses (``#session/`` and the key
    percent-encoded as the page's ``encodeURIComponent`` does)."""
    return f"{public_url}/ui/#session/{quote(target, safe=_URI_COMPONENT_SAFE)}"


def notice_text(target: str, last_seen: int) -> str:
    """The byte-exact v1 notice text."""
    return notice_template(target).text(last_seen)


# twin: store/postgres_functions.sql::sw_context_key (bound by
#   tests/conformance/test_context_keys.py::test_sql_renders_context_keys_as_python_does)
def context_key_for(target: str) -> str:
    return CONTEXT_PREFIX + target.encode("utf-8").hex()


# twin: store/postgres_functions.sql::sw_target_of_context_key (bound by
#   tests/conformance/test_context_keys.py::test_sql_decodes_context_keys_as_python_does)
def target_from_context_key(context_key: str | None) -> str | None:
    """Decode a session-state context key; None for anything else (fail closed)."""
    if not context_key or not context_key.lower().startswith(CONTEXT_PREFIX):
        return None
    payload = context_key[len(CONTEXT_PREFIX) :]
    if not payload or len(payload) % 2:
        return None
    try:
        return bytes.fromhex(payload).decode("utf-8", errors="strict")
    except ValueError:
        return None


def format_timestamp(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2026-11-30T10:20:37.123Z."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def format_line(ts_ms: int, text: str) -> str:
    """``System: [<timestamp>] <text>``; continuation lines keep the ``System: `` prefix."""
    first, *rest = text.split("\n")
    lines = [f"System: [{format_timestamp(ts_ms)}] {first}"]
    lines.extend(f"System: {line}" for line in rest)
    return "\n".join(lines)


def withheld_line(count: int) -> str:
    """The line a delivery ends with when the queue cap held back ``count`` watched sessions' notices
    (engine/evicted.py). Not a queue entry: it has no id, nothing acknowledges it."""
    sessions = "session" if count == 1 else "sessions"
    return (
        f"System: {count} more watched {sessions} changed; their notices follow on later turns. To reconcile now: "
        "sessions_list, then for each session whose stateVersion is above what you last saw: session_status "
        'sessionKey "<key>" changesSince <that number>.'
    )


def parse_notice(
    text: str, context_key: str | None, render: Callable[[str], NoticeTemplate] = notice_template
) -> tuple[str, int] | None:
    """(target, last_seen) when ``text`` is exactly the notice (as ``render`` words it) for the target its
    context key names."""
    target = target_from_context_key(context_key)
    if target is None:
        return None
    t = render(target)
    framed = text.startswith(t.prefix) and text.endswith(t.suffix)
    middle = text[len(t.prefix) : len(text) - len(t.suffix)] if framed else ""
    if not middle.isascii() or not middle.isdigit() or (len(middle) > 1 and middle[0] == "0"):
        return None
    return target, int(middle)
