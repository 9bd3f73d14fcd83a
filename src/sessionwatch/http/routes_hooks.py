"""A host's hook answered by the gateway itself: Claude Code's HTTP hooks post the very JSON a command hook
reads on stdin, so in gateway mode no process starts per prompt or tool call.

The answer is what ``sessionwatch hook`` would print (``hooks.run.answer_in_process``: the same rules and
the same at-least-once state, acknowledged at the session's next hook), or ``{}`` when there is nothing
to give; a person's prompt in the session's own adopted thread also nudges the monitor, after the answer.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from ..errors import NotFound
from ..hooks.hosts import HOSTS, USER_PROMPT_SUBMIT
from ..hooks.run import NUDGE_RETRY_MS, answer_in_process
from . import schemas
from .endpoints import Call, Endpoint

log = logging.getLogger("sessionwatch.hook")

# The host's own JSON, whatever fields its version adds; it always names its event.
HOOK_INPUT: schemas.Schema = {
    "type": "object",
    "description": "The host's hook input, as a command hook reads it on stdin.",
    "required": ["hook_event_name"],
    "properties": {"hook_event_name": {"type": "string", "minLength": 1, "maxLength": 100}},
}


def _answer(c: Call) -> Any:
    row = c.gw.session(c.path["key"], c.query.get("agentId"))  # an unknown session is a 404, as everywhere
    host = c.path["host"]
    if host not in HOSTS:
        raise NotFound(f"no hook for host {host!r} (expected {' or '.join(sorted(HOSTS))})")
    key, agent = row.session_key, row.agent_id
    store = c.gw.store
    where = "gateway:" + str(getattr(store, "url", None) or getattr(store, "path", None) or "store")
    text = answer_in_process(c.gw, where, host, key, agent, c.body)
    if c.body.get("hook_event_name") == USER_PROMPT_SUBMIT and not c.body.get("agent_id"):
        thread = c.body.get("session_id")
        link = c.gw.link(key, agent)
        if link and thread and link.get("threadId") == thread:  # the session's own adopted thread
            threading.Thread(
                target=_nudge, args=(c.gw, key, agent), name="sessionwatch-hook-nudge", daemon=True
            ).start()
    return json.loads(text) if text else {}


def _nudge(gw: Any, key: str, agent: str) -> None:
    try:
        gw.nudge(key, agent, wait_ms=NUDGE_RETRY_MS)
    except Exception as exc:  # noqa: BLE001 - the nudge is best-effort; the monitor's tick still comes
        log.warning("nudge after the %s hook failed: %s: %s", key, exc.__class__.__name__, exc)


ROUTES: list[Endpoint] = [
    Endpoint(
        "POST",
        "/v1/sessions/{key}/hooks/{host}",
        "answer_hook",
        "Answer a host's hook for the session (Claude Code HTTP hooks): the host's hook input in, what "
        "the command hook would print out ({} when nothing is pending).",
        _answer,
        tag="hooks",
        body=HOOK_INPUT,
        query={"agentId": schemas.AGENT_ID},
        result=schemas.ANY_OBJECT,
        thread=True,
    ),
]
