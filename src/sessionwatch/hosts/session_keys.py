"""The parts of a host session's own key that need no host's card: a host's id as it may stand in a key,
the agent of a key, a subagent's key. Standard library only (the hook's quick path uses it), and free of
the registry, so a room may use it (``identity.py`` adds what needs the rooms' cards).
"""

from __future__ import annotations

import os

from .agent_names import AGENT_CHARS, agent_from_folder

# A host's id goes into a key as it is; anything that is not a plain id (a key forbids whitespace and
# controls, and ':' would change what the key means) is not taken. No regular expressions: importing
# ``re`` is a noticeable part of the hook's quick run.
_ID_CHARS = AGENT_CHARS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
MAX_ID = 200


def host_id(value: object) -> str | None:
    """A host's session or agent id, when it can stand in a key as it is."""
    ok = isinstance(value, str) and 0 < len(value) <= MAX_ID and all(ch in _ID_CHARS for ch in value)
    return value if ok else None  # type: ignore[return-value]


def session_agent(agent: str | None, data: dict[str, object], *, local: bool = True) -> str:
    """The agent of a zero-config key: ``agent`` when given, else the host session's folder (Claude
    Code's project folder first, then the input's ``cwd``, then this process's). ``local=False``: a
    gateway answering a host's HTTP hook, whose own environment and folder are not the session's."""
    if agent:
        return agent
    cwd = data.get("cwd")
    here = cwd if isinstance(cwd, str) and cwd else ""
    if local:
        here = os.environ.get("CLAUDE_PROJECT_DIR") or here or os.getcwd()
    return agent_from_folder(here)


def key_of(agent: str, catalog: str, session_id: str) -> str:
    """A host session's key: ``agent:<agent>:<catalog>:<session id>``."""
    return f"agent:{agent}:{catalog}:{session_id}"


def subagent_key(agent: str, host_agent_id: str) -> str:
    return f"agent:{agent}:subagent:{host_agent_id}"


def agent_of_key(key: str) -> str | None:
    parts = key.split(":", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "agent" and parts[1] else None
