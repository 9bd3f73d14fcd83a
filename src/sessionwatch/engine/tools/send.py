"""sessions_send: a message into another session, optionally waiting for its reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ... import validation
from ...keys import shown
from ...store.records import MessageRow
from ...types import (
    SendResult,
)

if TYPE_CHECKING:
    from ..composed import Engine

from .base import (
    MAX_SEND_TIMEOUT_S,
    Caller,
    _caller_must_exist,
    _target,
    frame_message,
)


# -- sessions_send -------------------------------------------------------------------------------
def _send(gw: Engine, args: Mapping[str, Any], caller: Caller) -> SendResult:
    target = _target(gw, args.get("sessionKey"), caller)
    message = validation.text(args.get("message"), "message")
    watch = validation.boolean(args["watch"], "watch") if "watch" in args else None
    timeout = 0.0
    if args.get("timeoutSeconds") is not None:
        timeout = validation.number(args["timeoutSeconds"], "timeoutSeconds", maximum=MAX_SEND_TIMEOUT_S)
    _caller_must_exist(gw, caller)
    msg = gw.store.append_message(
        MessageRow(
            0,
            target.session_key,
            target.agent_id,
            "user",
            message,
            gw.clock(),
            provenance="inter_session",
            source_session_key=caller.key,
        )
    )
    gw._notify_messages()
    out: dict[str, Any] = {"status": "accepted", "messageId": msg.id}
    if watch is True:
        out["watched"] = (
            caller.qualified
            and caller.key != target.session_key
            and gw._register(caller.key, target.session_key, target.agent_id, "explicit")
        )
    if timeout > 0:
        reply = gw.wait_for_reply(target.session_key, target.agent_id, msg.id, timeout)
        if reply is None:
            out["status"] = "timeout"
        else:
            out["status"] = "ok"
            out["reply"] = reply.text
    watched = "" if "watched" not in out else (" Watching it now." if out["watched"] else " Not watched.")
    name = shown(target.session_key)
    if out["status"] == "ok":
        out["text"] = f"Reply from {name}:\n{frame_message('assistant', out['reply'])}"
    elif out["status"] == "timeout":
        out["text"] = f"Delivered to {name}; no reply within {timeout:g} s.{watched}"
    else:
        out["text"] = f"Delivered to {name} (message {msg.id}).{watched}"
    return cast(SendResult, out)
