"""Who may do what: the principal behind a request and the one policy every face consults.

A principal is either an admin (sees and does everything) or bound to a set of agent ids: it may act
only as, and read only, sessions of those agents. This module knows nothing of HTTP or MCP; faces
resolve a bearer token to a :class:`Principal` and ask :meth:`Principal.require_agent` (or filter with
:meth:`Principal.agent_filter`) before touching a session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import Forbidden
from .keys import agent_of


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. ``agents`` is empty for an admin (who is not limited)."""

    admin: bool
    agents: frozenset[str] = field(default_factory=frozenset)
    token_id: str | None = None  # None: the serve --token admin token, or a tokenless gateway
    name: str | None = None

    def covers(self, agent_id: str | None) -> bool:
        return self.admin or (agent_id is not None and agent_id in self.agents)

    def covers_key(self, session_key: str, agent_id: str | None = None) -> bool:
        """A session key's agent is its own (``agent:<id>:...``), or ``agent_id`` for the bare ``global``."""
        return self.covers(agent_of(session_key) or agent_id)

    def require_agent(self, agent_id: str | None, what: str = "session") -> None:
        if not self.covers(agent_id):
            raise Forbidden(
                f"this token may not touch the {what} of agent {agent_id!r}; it covers "
                f"{', '.join(sorted(self.agents)) or 'no agent'}"
            )

    def require_key(self, session_key: str, agent_id: str | None = None, what: str = "session") -> None:
        self.require_agent(agent_of(session_key) or agent_id, f"{what} {session_key!r}")

    def require_admin(self, what: str) -> None:
        if not self.admin:
            raise Forbidden(
                f"{what} needs an admin token; this token is scoped to agents {', '.join(sorted(self.agents))}"
            )

    def agent_filter(self) -> frozenset[str] | None:
        """None: no filter (admin); otherwise the agent ids reads are limited to."""
        return None if self.admin else self.agents


ADMIN = Principal(admin=True)


def scoped(agents: Iterable[str], *, token_id: str | None = None, name: str | None = None) -> Principal:
    return Principal(admin=False, agents=frozenset(agents), token_id=token_id, name=name)


def check_scope(scope: frozenset[str] | None, agent_id: str | None, what: str) -> None:
    """The tool layer's form of the check: ``scope`` None means unrestricted."""
    if scope is not None and (agent_id is None or agent_id not in scope):
        raise Forbidden(
            f"this token may not touch {what} (agent {agent_id!r}); it covers {', '.join(sorted(scope)) or 'no agent'}"
        )
