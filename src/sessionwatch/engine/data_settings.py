"""Resolving a process's data settings against the ones stored with the store (docs/cli.md, "Data settings").

The store holds queue cap, retention, row cap and wake coalescing window from its creation on. A
process uses the stored values; a value it was explicitly given (environment, flag, a non-default
``Settings`` field) must agree with them, or opening fails with an error that names both values and
the command that changes them.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..errors import Conflict, StoreUnavailable
from ..settings import DATA_SETTINGS, Settings, data_values, explicit_data
from ..store.base import Store

log = logging.getLogger("sessionwatch.engine")


def describe(name: str, value: int) -> str:
    if name == "retention_ms" and value % 86_400_000 == 0:
        return f"{value} ({value // 86_400_000} days)"
    return str(value)


def resolve(store: Store, settings: Settings, now: int, *, read_only: bool = False) -> Settings:
    """``settings`` with the stored data values; stores the missing ones unless ``read_only``."""
    try:
        stored = store.data_settings()
    except Exception as exc:
        raise StoreUnavailable(f"cannot read the store's data settings: {exc.__class__.__name__}: {exc}") from exc
    wanted = data_values(settings)
    missing = {n: v for n, v in wanted.items() if n not in stored}
    if missing and not read_only:
        try:
            stored = store.init_data_settings(missing, now)
        except Exception as exc:  # noqa: BLE001 - an unwritable store still opens (health says it is not ready)
            log.warning(
                "could not store the data settings (%s: %s); using %s for now", exc.__class__.__name__, exc, missing
            )
    conflicts = []
    for name, (value, source) in explicit_data(settings).items():
        have = stored.get(name)
        if have is not None and have != value:
            flag = DATA_SETTINGS[name].flag
            drop = (
                f"unset {source.split('=')[0]}"
                if source.startswith("SESSIONWATCH_")
                else f"leave out {source.split('=')[0].split()[0]}"
                if source.startswith("--")
                else "leave it out"
            )
            conflicts.append(
                f"{source} conflicts with the store's {name} {describe(name, have)}; change the "
                f"stored value with `sessionwatch settings set {flag} {value}`, or {drop}"
            )
    if conflicts:
        raise Conflict("the store's data settings are shared by every process: " + "; ".join(conflicts))
    resolved: dict[str, Any] = {n: stored.get(n, v) for n, v in wanted.items()}  # field name -> value
    return dataclasses.replace(settings, **resolved)
