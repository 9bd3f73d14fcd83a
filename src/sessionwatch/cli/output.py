"""Human output with rich, machine output as JSON; errors to stderr with a stable exit code.

rich is imported where a table or console is made, not at the top: a command asked for JSON (as scripts
and hosts ask) never loads it, about a quarter of such a command's CPU at start."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

from ..keys import shown_text
from ..notices import format_timestamp


def _width(stream: Any) -> int | None:
    # A pipe or file has no width: let tables take what they need instead of wrapping keys at 80.
    if stream.isatty():
        return None
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 240


def console() -> Console:
    from rich.console import Console

    # Built per call so tests and redirected output see the current sys.stdout; no colour when piped.
    return Console(file=sys.stdout, highlight=False, emoji=False, soft_wrap=True, width=_width(sys.stdout))


def err_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False, emoji=False, soft_wrap=True, width=_width(sys.stderr))


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_jsonl(data: Any) -> None:
    sys.stdout.write(dumps(data) + "\n")
    sys.stdout.flush()


def ts(ms: Any) -> str:
    return format_timestamp(int(ms)) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else ""


def cell(value: Any) -> Text:
    """Cell text is data, never rich markup (a key or summary may contain '[...]'), and a key stored with
    characters that hide or reorder text shows them escaped (``keys.shown_text``)."""
    from rich.text import Text

    if value is None:
        return Text("")
    if isinstance(value, (dict, list)):
        return Text(shown_text(dumps(value)))
    return Text(shown_text(str(value)))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(shown_text(title)) if title else None, title_justify="left", show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*(cell(v) for v in r))
    return t


def record_table(title: str | None, items: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> Table:
    """A table of JSON objects; columns default to the union of their keys in first-seen order."""
    if columns is None:
        seen: dict[str, None] = {}
        for item in items:
            seen.update(dict.fromkeys(item))
        columns = list(seen)
    return table(title, columns, ([item.get(c) for c in columns] for item in items))


def kv_table(title: str | None, data: dict[str, Any]) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(shown_text(title)) if title else None, title_justify="left", show_header=False)
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k, v in data.items():
        t.add_row(Text(k, style="bold"), cell(v))
    return t


def emit(as_json: bool, data: Any, human: Callable[[Console], None]) -> None:
    if as_json:
        print_json(data)
    else:
        human(console())


def event_line(e: dict[str, Any]) -> str:
    """One signal-log row for people: sequence, time, session, kind, actor and summary."""
    actor = e.get("actorType", "")
    if e.get("actorId"):
        actor += f":{e['actorId']}"
    return (
        f"#{e.get('sequence')}  {ts(e.get('occurredAt'))}  {e.get('sessionKey', '')}  {e.get('kind')}  "
        f"{actor}  {e.get('summary', '')}"
    )
