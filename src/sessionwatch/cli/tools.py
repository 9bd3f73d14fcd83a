"""``sessionwatch tool NAME``: one of the six tools, run as a session, its result printed (for a person, a
script, or a host without MCP: Pi's extension registers the tools with Pi and runs each call through this).

The result is the engine's own (``Gateway.call_tool``: the same JSON as over HTTP and MCP, notices aside:
they ride along only with MCP results). ``--json`` prints it whole; without, its text. A tool's error is
the command's error: its JSON under ``--json``, and the exit code of its kind.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ..errors import InvalidArgument, NotFound
from ..hosts.registry import NAMES
from ..keys import parse_key
from ..validation import check_args
from .app import State, cli, command, pass_state
from .output import emit

SESSION_ENV = "SESSIONWATCH_SESSION"  # as for the hook: a key pinned in the host's environment
MAX_INPUT = 1 << 20


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise InvalidArgument(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} is not a JSON object")
    return value


def _stdin(what: str) -> dict[str, Any]:
    text = sys.stdin.read(MAX_INPUT + 1)
    if len(text) > MAX_INPUT:
        raise InvalidArgument(f"{what} is larger than {MAX_INPUT} characters")
    return _object(text, what)


def caller_of(host: str | None, session: str | None, agent: str | None, payload: dict[str, Any]) -> str:
    """The session the tool runs as: ``--session`` (or ``$SESSIONWATCH_SESSION``), else the host session's own
    key, made as the hook makes it from the same input (``agent:<agent>:<host>:<session id>``)."""
    key = session or os.environ.get(SESSION_ENV)
    if key:
        return key
    if host is not None:
        from ..hosts.identity import zero_config_key

        own = zero_config_key(host, agent, payload)
        if own is not None:
            return own
        raise InvalidArgument(f"the input names no {host} session (session_id): give --session KEY")
    raise InvalidArgument("give --session KEY: the session the tool runs as")


def linked(backend: Any, host: str, payload: dict[str, Any]) -> str | None:
    """The session the host thread's adoption link names, as the hook takes it (a local store only: a
    gateway lists no links by thread, and there the host session's own key stands, as for the hook)."""
    from ..hosts.registry import room

    thread, path = payload.get("session_id"), payload.get("transcript_path")
    if backend.remote or not (isinstance(thread, str) or isinstance(path, str)):
        return None
    links = backend.thread_links(
        room(host).hook.catalog, thread if isinstance(thread, str) else None, path if isinstance(path, str) else None
    )
    key = links[0].get("sessionKey") if links else None
    return key if isinstance(key, str) and key else None


@command(cli, "tool")
@click.argument("name", metavar="NAME")
@click.argument("arguments", metavar="[ARGUMENTS]", required=False)
@click.option("--session", "session_key", metavar="KEY", help=f"The session the tool runs as. Env: {SESSION_ENV}.")
@click.option(
    "--agent",
    "agent_id",
    metavar="AGENT_ID",
    help="With --host: the agent of the host session's own key (default: its folder's name). With --session: "
    "only for bare 'global'.",
)
@click.option(
    "--host",
    type=click.Choice(list(NAMES)),
    help="Read a host's input on stdin ({session_id, transcript_path, cwd, arguments}); without --session the "
    "tool runs as the session the host's hook stands for (the thread's adoption link, else its own key).",
)
@pass_state
def tool_cmd(
    state: State,
    name: str,
    arguments: str | None,
    session_key: str | None,
    agent_id: str | None,
    host: str | None,
) -> None:
    """Run tool NAME as a session and print its result (ARGUMENTS: a JSON object; '-' reads it from stdin).

    NAME is one of sessions_spawn, sessions_send, session_status, sessions_list,
    sessions_history, session_unwatch (docs/mcp.md). The session is created when
    missing, as the MCP server does for its caller.

    \b
    Examples:
      sessionwatch tool sessions_list --session agent:main:main
      sessionwatch tool session_status '{"sessionKey": "agent:main:w", "changesSince": 4}' --session agent:main:main
      echo '{"session_id": "0b1c", "cwd": ".", "arguments": {}}' | sessionwatch --json tool sessions_list --host pi
    """
    from ..engine.tools import TOOLS  # loaded here: `sessionwatch --help` loads every command's module

    if name not in TOOLS:
        raise InvalidArgument(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
    if host is not None:
        if arguments is not None:
            raise InvalidArgument("--host reads the arguments from the host's input on stdin: give no ARGUMENTS")
        payload = _stdin("the host's input")
        args = payload.get("arguments") or {}
        if not isinstance(args, dict):
            raise InvalidArgument("the host's input: 'arguments' is not a JSON object")
    else:
        payload = {}
        args = _stdin("ARGUMENTS") if arguments == "-" else _object(arguments or "", "ARGUMENTS")
    caller = caller_of(host, session_key, None if session_key else agent_id, payload)
    parse_key(caller, "--session")
    check_args(args, set(TOOLS[name].input_schema["properties"]), name)  # refused before anything is written
    backend = state.backend()
    if host is not None and not (session_key or os.environ.get(SESSION_ENV)):
        caller = linked(backend, host, payload) or caller
    owner = agent_id if session_key else None  # a zero-config key names its agent itself
    try:
        backend.get_session(caller, owner)
    except NotFound:
        backend.put_session(caller, agent_id=owner)
    out = backend.tool(name, args, caller=caller, agent_id=owner)
    emit(state.json, out, lambda c: c.print(str(out.get("text") or json.dumps(out, indent=2)), markup=False))
