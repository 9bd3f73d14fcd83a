"""``POST /v1/tools/{name}``: the six tools, called by the session named in ``X-Session-Key``."""

from __future__ import annotations

import functools
from typing import Any

import anyio.to_thread

from ..engine.tools import TOOLS
from ..errors import Forbidden, InvalidArgument, UnknownTool
from ..headers import decode_header_value
from ..keys import parse_key
from . import schemas
from .auth import TOOL
from .endpoints import Call, Endpoint
from .errors import tool_error_response

CALLER_HEADER = "x-session-key"
AGENT_HEADER = "x-agent-id"


def _waits(args: dict[str, Any]) -> bool:
    timeout = args.get("timeoutSeconds")
    return isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0


async def _call_tool(c: Call) -> Any:
    name = c.path["name"]
    tool = TOOLS.get(name)
    if tool is None:
        raise UnknownTool(f"unknown tool {name!r}; tools: {', '.join(sorted(TOOLS))}")
    raw_caller = c.request.headers.get(CALLER_HEADER)
    if raw_caller is None:
        raise InvalidArgument("the X-Session-Key header must name the calling session")
    caller = parse_key(decode_header_value(raw_caller, "X-Session-Key"), "X-Session-Key")
    if tool.acts_as_caller and not caller.qualified:
        raise Forbidden(
            f"{name} acts as the caller: X-Session-Key must be an agent-qualified key "
            "('agent:<agentId>:<rest>'), not the bare 'global'"
        )
    raw_agent = c.request.headers.get(AGENT_HEADER)
    agent_id = decode_header_value(raw_agent, "X-Agent-Id") if raw_agent is not None else None
    # The tool layer checks the caller and every session the tool touches against the token's agents.
    run = functools.partial(
        c.gw.call_tool, name, c.body, caller=caller.raw, agent_id=agent_id, scope=c.principal.agent_filter()
    )
    if name == "sessions_send" and _waits(c.body):
        # Waiting for a reply blocks for up to timeoutSeconds of real time: keep it off the event loop.
        result = await anyio.to_thread.run_sync(run, limiter=c.runtime.wait_limiter)
    else:  # off the event loop like every store call (endpoints.make_handler)
        result = await anyio.to_thread.run_sync(run, limiter=c.runtime.store_limiter)
    if "error" in result:
        return tool_error_response(result)
    return result


ROUTES: list[Endpoint] = [
    # Documented per tool in openapi.py (one path per tool, schemas from engine.tools.TOOLS).
    Endpoint(
        "POST",
        "/v1/tools/{name}",
        "call_tool",
        "Run one tool as the session named in X-Session-Key.",
        _call_tool,
        tag="tools",
        body=schemas.ANY_OBJECT,
        touches=TOOL,
    ),
]
