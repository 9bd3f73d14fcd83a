"""Which sessionwatch session a host session stands for when no key was given (zero-config identity).

Each host session gets its own key from the host's own session id: ``agent:<agent>:claude:<session id>``
(Claude Code), ``agent:<agent>:codex:<session id>`` (Codex) or ``agent:<agent>:pi:<session id>`` (Pi),
the key an adoption of that thread gets by default, so a resumed host session (same id) keeps its key. A
subagent the host starts inside it is ``agent:<agent>:subagent:<host agent id>``. ``<agent>`` is
``--agent`` when given (``install`` writes the project folder's name there), else the folder the host
session runs in, normalized to a valid agent id.

Standard library only: the hook's quick path (``quick.py``) derives the same key before anything loads.
"""

from __future__ import annotations

import os

from .agent_names import DEFAULT_AGENT, MAX_AGENT, agent_from_folder
from .registry import (
    CATALOGS as CATALOG,  # host name -> catalog id, from each room's card
    ROOMS,
)
from .session_keys import agent_of_key, host_id, key_of, session_agent, subagent_key

__all__ = [
    "CATALOG",
    "DEFAULT_AGENT",
    "MAX_AGENT",
    "ROOMS",
    "agent_from_folder",
    "agent_of_key",
    "host_id",
    "session_agent",
    "subagent_key",
]


def host_key(agent: str, host: str, session_id: str) -> str:
    """The key of a host session (twin: upstream.adoption.default_session_key for a local thread)."""
    return key_of(agent, CATALOG[host], session_id)


def zero_config_key(host: str, agent: str | None, data: dict[str, object], *, local: bool = True) -> str | None:
    """The host session's own key, or None when the input names no usable session id."""
    sid = host_id(data.get("session_id"))
    if sid is None or host not in CATALOG:
        return None
    return host_key(session_agent(agent, data, local=local), host, sid)


def mcp_session_key(agent: str | None) -> str | None:
    """The key an MCP server stands for when it was given none, started by a host that hands its servers
    the session's id (its room's ``mcp_session_env``: Claude Code's ``CLAUDE_CODE_SESSION_ID``; the
    watchers sessionwatch's Pi extension and OpenCode plugin start get ``SESSIONWATCH_PI_SESSION_ID`` or
    ``SESSIONWATCH_OPENCODE_SESSION_ID``)."""
    for room in ROOMS.values():
        sid = host_id(os.environ.get(room.mcp_session_env)) if room.mcp_session_env else None
        if sid is not None:
            return host_key(session_agent(agent, {}), room.name, sid)
    return None


# A host that starts one MCP server for all of its sessions (OpenCode) names the session in each tool call
# instead: its plugin adds a hidden argument, CALL_ARG, shaped like a hook input ({"session_id", "agent_id"
# for a subagent, "cwd"}). PER_CALL_ENV, in the server's environment (install writes it into the server's
# entry), says so and names the host; the server takes the argument out before the tool sees it.
PER_CALL_ENV = "SESSIONWATCH_SESSION_PER_CALL"
CALL_ARG = "_sessionwatch"


def calls_name_the_session() -> str | None:
    """The host that started this MCP server without a session, naming it in each call (``PER_CALL_ENV``),
    or None: the server needs a key (``--session``, or the host's session id in its environment)."""
    host = os.environ.get(PER_CALL_ENV)
    return host if host in ROOMS else None


def call_session_key(
    host: str, agent: str | None, named: object, links: list[dict[str, object]] | None = None
) -> str | None:
    """The key of the host session a tool call names in ``CALL_ARG`` (a subagent's own key when it comes
    from inside one), as the hook names it from the same input: the session the thread's adoption link names
    (``links``, newest first) when there is one, else the host session's own key. None when the call names
    no session that can stand in a key."""
    if not isinstance(named, dict):
        return None
    own = zero_config_key(host, agent, named)
    if own is None:
        return None
    linked = links[0].get("sessionKey") if links else None
    key = linked if isinstance(linked, str) and linked else own
    sub = host_id(named.get("agent_id"))
    return key if sub is None else subagent_key(agent_of_key(key) or DEFAULT_AGENT, sub)
