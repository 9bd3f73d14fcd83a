"""session_unwatch: stop watching a session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...keys import shown
from ...types import (
    UnwatchResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    Caller,
    _caller_must_exist,
    _target,
)


# -- session_unwatch -----------------------------------------------------------------------------
def _unwatch(gw: Engine, args: Mapping[str, Any], caller: Caller) -> UnwatchResult:
    # an unknown target or caller is bad input: refuse it before writing a mute row
    target = _target(gw, args.get("sessionKey"), caller).session_key
    if not caller.qualified:
        return {"unwatched": False, "text": "A bare 'global' session holds no watches."}
    _caller_must_exist(gw, caller)
    done = gw._unwatch(caller.key, target)  # both checked: the caller parsed, the target found
    return {
        "unwatched": done,
        "text": f"Stopped watching {shown(target)}."
        if done
        else f"{shown(caller.key)} was not watching {shown(target)}; muted.",
    }
