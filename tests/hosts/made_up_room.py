"""A host that does not exist, as one room: what adding a host takes (see test_rooms.py).

``python -m tests.hosts.made_up_room ARGS...`` runs ``sessionwatch ARGS...`` with this room registered
before anything else loads, the way a room package in ``sessionwatch/hosts/`` and its line in
``hosts/registry.py`` would register it.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sessionwatch.errors import NotFound
from sessionwatch.hosts import registry
from sessionwatch.hosts.base import USER_PROMPT_SUBMIT, HookAdapter, Room
from sessionwatch.hosts.checks import Check, Diagnosis, ScopeReport
from sessionwatch.hosts.installer import Change, Installation
from sessionwatch.hosts.readers import Adopted, Reading

NAME = "made-up"
CATALOG = "madeup"
MARK = ".made-up-host.json"  # what its "installer" writes into the folder


class Installer:
    path_hint = "`sessionwatch` is not on this PATH"
    quiet_version = False

    def install(
        self,
        scope: str,
        directory: str | None,
        session: str | None,
        agent: str | None,
        global_args: list[str],
        *,
        trust: bool = True,
    ) -> Installation:
        path = Path(directory or os.getcwd()) / MARK
        action = "unchanged" if path.exists() else "created"
        path.write_text(f'{{"session": "{session}"}}\n', encoding="utf-8")
        return Installation([Change(str(path), action, ["the made-up hook"])], lambda: None)

    def uninstall(self, scope: str, directory: str | None) -> list[Change]:
        path = Path(directory or os.getcwd()) / MARK
        if not path.exists():
            return [Change(str(path), "unchanged")]
        path.unlink()
        return [Change(str(path), "removed", ["the made-up hook"])]

    def diagnose(self, scope: str, directory: str | None, *, probe: bool = True) -> Diagnosis:
        path = Path(directory or os.getcwd()) / MARK
        report = ScopeReport(NAME, scope, str(path.parent), path.exists())
        if report.installed:
            report.checks.append(Check("files", True, f"{path} is there"))
        return Diagnosis(report)

    def version(self) -> str | None:
        return "made-up 1.0"


class Reader:
    """One session, ``t1``, whose every read finds one new prompt a person typed."""

    catalog_id = CATALOG
    upstream_kind = "made-up-cli"

    def at(self, place: str | os.PathLike[str]) -> Reader:
        return self

    def adopt(self, thread_id: str) -> Adopted:
        if thread_id != "t1":
            raise NotFound(f"no made-up session {thread_id!r}")
        return (self.upstream_kind, {"where": "nowhere"}, {"n": 0}), None

    def list_threads(self) -> list[dict[str, Any]]:
        return [{"catalogId": CATALOG, "threadId": "t1", "updatedAt": 1, "title": "a made-up session"}]

    def read(
        self,
        ref: dict[str, Any],
        thread_id: str,
        marker: dict[str, Any],
        own: Callable[[], Iterable[str]],
        *,
        window: int,
        deadline: float,
    ) -> Reading | None:
        n = int(marker.get("n", 0)) + 1
        return Reading(turns=1, marker={"n": n}, dedupe_id=f"made-up-{n}")


ROOM = Room(
    HookAdapter(NAME, CATALOG, (USER_PROMPT_SUBMIT,), tells_sender=True),  # its side says who sent a prompt
    label="Made Up",
    program="made-up",
    scopes=("project",),
    installer=Installer,
    reader=Reader,
    gateway_route=False,
)


def register() -> None:
    registry.ROOMS[NAME] = ROOM
    registry.NAMES = (*registry.NAMES, NAME)
    registry.CATALOGS[NAME] = CATALOG


if __name__ == "__main__":
    register()
    sys.argv = ["sessionwatch", *sys.argv[1:]]
    runpy.run_module("sessionwatch", run_name="__main__", alter_sys=True)
