"""The interface every room's installer gives (:class:`Installer`: ``sessionwatch install|uninstall|doctor
HOST`` for a scope and folder) and what it answers with: the file changes (:class:`Change`), an install and its
check (:class:`Installation`, :class:`Verified`), and a scope's report for ``doctor`` (:class:`Check`,
:class:`ScopeReport`, :class:`Diagnosis`; :class:`Found`: what of ours a room found installed).

Plain types, below the kit that builds them (``installer.py``, ``checks.py``) and the card that names an
installer (``base.Room``), so none of those imports another in a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Change:
    path: str
    action: str  # created, updated, unchanged, removed, restored, skipped, trusted, failed
    what: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "action": self.action, "what": self.what}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Check:
    name: str
    ok: bool | None  # None: a warning, or nothing to check
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


@dataclass
class ScopeReport:
    host: str
    scope: str
    dir: str | None
    installed: bool
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "scope": self.scope,
            "dir": self.dir,
            "installed": self.installed,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
        }


@dataclass
class Found:
    hooks: dict[str, str]  # event -> our command
    server: dict[str, Any] | None
    problems: list[Check]
    http: dict[str, str] = field(default_factory=dict)  # event -> the gateway URL of our HTTP hook


@dataclass
class Diagnosis:
    """One scope's report, and what the face asks the store or gateway: (global options, session, agent) of
    the installed command, or None when there is nothing to ask."""

    report: ScopeReport
    backend: tuple[list[str], str | None, str | None] | None = None


class Verified(Protocol):
    """What ``install --verify`` found: ``ok``, the JSON under ``verify`` and the lines a person reads."""

    @property
    def ok(self) -> bool: ...

    def to_json(self) -> dict[str, Any]: ...

    def lines(self) -> list[str]: ...


@dataclass
class Installation:
    """What one install changed, and how to check it as the host will use it (``verify``; None when
    nothing of ours is there to fire)."""

    changes: list[Change]
    verify: Callable[[], Verified | None]


class Installer(Protocol):
    """A room's installer: ``sessionwatch install|uninstall|doctor HOST`` for a scope and folder.

    ``path_hint``: the warning when ``sessionwatch`` is not on PATH for a project install; ``quiet_version``:
    ask the host's program for its version only when the room is installed or named (a slow ``--version``).
    """

    path_hint: str
    quiet_version: bool

    def install(
        self,
        scope: str,
        directory: str | None,
        session: str | None,
        agent: str | None,
        global_args: list[str],
        *,
        trust: bool = True,
    ) -> Installation: ...

    def uninstall(self, scope: str, directory: str | None) -> list[Change]: ...

    def diagnose(self, scope: str, directory: str | None, *, probe: bool = True) -> Diagnosis:
        """What is installed in one scope, checked (the store or gateway aside: see ``Diagnosis.backend``)."""
        ...

    def version(self) -> str | None: ...
