"""``sessionwatch settings show|set``: the data settings stored with the store (docs/cli.md, "Data settings")."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from ..errors import InvalidArgument
from ..settings import DATA_SETTINGS, DAY_MS, Settings, check_value
from .app import State, cli, command, json_option, pass_state
from .output import emit, table

if TYPE_CHECKING:
    from rich.console import Console  # rich loads only when a table is shown (output.py)

    from ..engine import Gateway

REFRESH_NOTE = (
    "Processes that share the store pick up the new values within 10 s; a lower row cap or "
    "retention applies at the next prune (`sessionwatch prune` runs one now)."
)


@cli.group("settings", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@json_option
def settings_group() -> None:
    """Show or change the data settings stored with the store.

    Queue cap, retention, row cap and wake coalescing window define the data, so they are
    stored with the store when it is created and every process (serve, mcp, the CLI) uses the
    stored values. A process started with a different value (SESSIONWATCH_QUEUE_CAP,
    SESSIONWATCH_RETENTION_MS, SESSIONWATCH_MAX_EVENTS, SESSIONWATCH_WAKE_COALESCE_MS) stops
    with a conflict error (exit 5); change the stored value with 'settings set'.

    \b
    Examples:
      sessionwatch settings show
      sessionwatch settings set --max-events 200000
      sessionwatch settings show --json
    """


def _open(state: State) -> Gateway:
    """The engine on the local store, read-only: opening stores nothing (the data settings of this
    environment are not checked against the stored ones either, so a conflict can be shown and fixed);
    only 'settings set' writes, what it was asked to."""
    if state.gateway:
        raise InvalidArgument(
            "the data settings live with the store: run 'settings' with a local --store, not --gateway"
        )
    from ..engine import Gateway

    return Gateway.open(state.store, timers=False, read_only=True, prune_on_open=False)


def _shown(name: str, value: int | None) -> str:
    if value is None:
        return "-"
    if name == "retention_ms" and value % DAY_MS == 0:
        return f"{value} ({value // DAY_MS} days)"
    return str(value)


def _env_notes(stored: dict[str, int]) -> list[str]:
    notes = []
    for spec in DATA_SETTINGS.values():
        raw = os.environ.get(spec.env, "").strip()
        if raw and raw != str(stored.get(spec.field, raw)):
            notes.append(
                f"{spec.env}={raw} in this environment differs from the stored {spec.field} "
                f"{stored.get(spec.field)}: processes started with it stop with a conflict error."
            )
    return notes


@command(settings_group, "show")
@pass_state
def show_cmd(state: State) -> None:
    """Show the stored data settings (and the defaults of a store that has none yet).

    \b
    Examples:
      sessionwatch settings show
      sessionwatch --store postgresql://postgres@127.0.0.1:5432/sw settings show --json
    """
    gw = _open(state)
    try:
        stored = gw.stored_data_settings()
    finally:
        gw.close()
    defaults = Settings()
    rows = {
        name: {
            "value": stored.get(name),
            "default": getattr(defaults, name),
            "stored": name in stored,
            "env": spec.env,
            "meaning": spec.meaning,
        }
        for name, spec in DATA_SETTINGS.items()
    }
    notes = _env_notes(stored)
    out = {"store": state.store, "settings": rows, "notes": notes}

    def human(c: Console) -> None:
        c.print(
            table(
                "Data settings",
                ["setting", "value", "default", "env", "meaning"],
                [
                    [
                        n,
                        _shown(n, r["value"]) if r["stored"] else "(not stored yet)",
                        _shown(n, r["default"]),
                        r["env"],
                        r["meaning"],
                    ]
                    for n, r in rows.items()
                ],
            )
        )
        for note in notes:
            c.print(note, markup=False)

    emit(state.json, out, human)


@command(settings_group, "set")
@click.option("--queue-cap", type=int, metavar="N", help="System-event queue entries per session (>= 1).")
@click.option("--retention-days", type=int, metavar="DAYS", help="Log retention in days (>= 0).")
@click.option("--retention-ms", type=int, metavar="MS", help="Log retention in milliseconds (>= 0).")
@click.option("--max-events", type=int, metavar="N", help="Log row cap (>= 1).")
@click.option("--wake-coalesce-ms", type=int, metavar="MS", help="Wake coalescing window in ms (>= 0).")
@pass_state
def set_cmd(
    state: State,
    queue_cap: int | None,
    retention_days: int | None,
    retention_ms: int | None,
    max_events: int | None,
    wake_coalesce_ms: int | None,
) -> None:
    """Change stored data settings; prints the old and the new values.

    \b
    Examples:
      sessionwatch settings set --max-events 200000
      sessionwatch settings set --retention-days 7 --queue-cap 50
    """
    if retention_days is not None and retention_ms is not None:
        raise InvalidArgument("give --retention-days or --retention-ms, not both")
    given: dict[str, tuple[Any, str]] = {}
    if queue_cap is not None:
        given["queue_cap"] = (queue_cap, "--queue-cap")
    if retention_days is not None:
        if retention_days < 0:
            raise InvalidArgument(f"--retention-days must be >= 0, got {retention_days}")
        given["retention_ms"] = (retention_days * DAY_MS, "--retention-days")
    if retention_ms is not None:
        given["retention_ms"] = (retention_ms, "--retention-ms")
    if max_events is not None:
        given["max_events"] = (max_events, "--max-events")
    if wake_coalesce_ms is not None:
        given["wake_coalesce_ms"] = (wake_coalesce_ms, "--wake-coalesce-ms")
    if not given:
        raise InvalidArgument(
            "nothing to set: give at least one of --queue-cap, --retention-days, --retention-ms, "
            "--max-events, --wake-coalesce-ms"
        )
    changes = {name: check_value(name, value, flag) for name, (value, flag) in given.items()}
    gw = _open(state)
    try:
        old, new = gw.set_data_settings(changes)
    finally:
        gw.close()
    rows = {n: {"old": old.get(n), "new": new.get(n)} for n in DATA_SETTINGS}
    changed = sorted(n for n in changes if old.get(n) != new.get(n))
    out = {"store": state.store, "settings": rows, "changed": changed, "note": REFRESH_NOTE}

    def human(c: Console) -> None:
        c.print(
            table(
                "Data settings",
                ["setting", "old", "new", ""],
                [
                    [n, _shown(n, r["old"]), _shown(n, r["new"]), "changed" if n in changed else ""]
                    for n, r in rows.items()
                ],
            )
        )
        c.print(REFRESH_NOTE, markup=False)

    emit(state.json, out, human)
