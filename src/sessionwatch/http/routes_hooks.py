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

from ..errors import InvalidArgument, NotFound
from ..hooks.delivery import handed_out
from ..hooks.host_sessions import Who, adopted
from ..hooks.hosts import HOSTS, USER_PROMPT_SUBMIT
from ..hooks.run import NUDGE_RETRY_MS, InProcess, answer_in_process
from ..hosts.identity import zero_config_key
from . import schemas
from .auth import TOOL
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
    text = answer_in_process(c.gw, _where(c), host, key, agent, c.body)
    if c.body.get("hook_event_name") == USER_PROMPT_SUBMIT and not c.body.get("agent_id"):
        thread = c.body.get("session_id")
        link = c.gw.link(key, agent)
        if link and thread and link.get("threadId") == thread:  # the session's own adopted thread
            threading.Thread(
                target=_nudge, args=(c.gw, key, agent), name="sessionwatch-hook-nudge", daemon=True
            ).start()
    return json.loads(text) if text else {}


def _answer_own(c: Call) -> Any:
    """A host session's own key (no key installed): made from the input's session id, created and
    adopted on its first event, then answered as above."""
    host = c.path["host"]
    if host not in HOSTS:
        raise NotFound(f"no hook for host {host!r} (expected {' or '.join(sorted(HOSTS))})")
    agent = c.query.get("agentId")
    key = zero_config_key(host, agent, c.body, local=False)
    if key is None:
        raise InvalidArgument("the hook input has no session_id a key can be made of (letters, digits, _ . -)")
    c.principal.require_key(key, None)  # a scoped token answers only its own agents' sessions
    if c.gw.link(key) is None:
        who = Who(key, None, "host session id", False)
        adopted(InProcess(c.gw, _where(c)), HOSTS[host].catalog, c.body, who)
    c.path["key"] = key
    return _answer(c)


def _handed_out(c: Call) -> Any:
    """The entry ids this gateway's hook route handed to the session's host and has not yet seen
    acknowledged (its answer state): a push from the host's machine leaves them alone."""
    row = c.gw.session(c.path["key"], c.query.get("agentId"))
    return {"ids": sorted(handed_out(row.session_key))}


def _where(c: Call) -> str:
    store = c.gw.store
    return "gateway:" + str(getattr(store, "url", None) or getattr(store, "path", None) or "store")


def _nudge(gw: Any, key: str, agent: str) -> None:
    try:
        gw.nudge(key, agent, wait_ms=NUDGE_RETRY_MS)
    except Exception as exc:  # noqa: BLE001 - the nudge is best-effort; the monitor's tick still comes
        log.warning("nudge after the %s hook failed: %s: %s", key, exc.__class__.__name__, exc)


ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/sessions/{key}/hooks/handed-out",
        "hooks_handed_out",
        "The queue entry ids this gateway's hook route handed to the session's host (in a hook's answer) "
        "and has not yet seen acknowledged: the session has them, so a push from its machine skips them.",
        _handed_out,
        tag="hooks",
        query={"agentId": schemas.AGENT_ID},
        result=schemas.R_HANDED_OUT,
    ),
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
    Endpoint(
        "POST",
        "/v1/hooks/{host}",
        "answer_own_hook",
        "Answer a host's hook for the host session's own key, agent:AGENT:claude:<session_id> (Claude Code) "
        "or agent:AGENT:codex:<session_id> (Codex): created and adopted on its first event. AGENT: agentId, "
        "else the name of the input's cwd.",
        _answer_own,
        tag="hooks",
        touches=TOOL,  # the key is made from the input: checked in the handler
        body=HOOK_INPUT,
        query={"agentId": schemas.AGENT_ID},
        result=schemas.ANY_OBJECT,
        thread=True,
    ),
]
