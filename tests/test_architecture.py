"""ARCHITECTURE.md stays true to the folders: its list of every module names each module of the package and
nothing else, and every module path it gives anywhere exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "sessionwatch"
TOP = "sessionwatch/"  # the folder line of the package's own top-level modules
# a module path as the page writes one: folders, then a module (engine/gateway.py, tests/hosts/test_rooms.py)
PATH = re.compile(r"(?<![\w./<{-])((?:\w+/)+\w+\.py)\b")


def _every_module_block(text: str) -> str:
    section = text.split("\n## Every module\n", 1)
    assert len(section) == 2, "ARCHITECTURE.md has no '## Every module' section"
    found = re.search(r"^```text\n(.*?)^```", section[1], re.S | re.M)
    assert found is not None, "the '## Every module' section has no ```text block"
    return found.group(1)


def listed_modules(block: str) -> list[str]:
    """The modules the block names, as paths under the package: a line that starts with ``folder/`` sets the
    folder, and each ``name.py`` on it and on the lines after it is that folder's."""
    folder: str | None = None
    names: list[str] = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            head = line.split()[0]
            assert head.endswith("/"), f"a line of the list starts with a folder, not {head!r}"
            folder = "" if head == TOP else head
        names += [f"{folder}{name}" for name in re.findall(r"(?<![\w/])(\w+\.py)\b", line) if folder is not None]
    return names


def package_modules() -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


def test_the_list_reads_folders_and_their_modules() -> None:
    block = "sessionwatch/  keys.py (keys), types.py\nhosts/pi/      room.py,\n               reader.py (a file)\n"
    assert listed_modules(block) == ["keys.py", "types.py", "hosts/pi/room.py", "hosts/pi/reader.py"]


def test_every_module_of_the_package_is_listed_once_and_nothing_else() -> None:
    listed = listed_modules(_every_module_block((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")))
    twice = sorted({m for m in listed if listed.count(m) > 1})
    missing = sorted(package_modules() - set(listed))
    gone = sorted(set(listed) - package_modules())
    assert (missing, gone, twice) == ([], [], []), (
        f"ARCHITECTURE.md's 'Every module' misses {missing}, names modules that do not exist {gone}, "
        f"lists twice {twice}"
    )


def test_every_module_path_the_page_gives_exists() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = sorted(
        {p for p in PATH.findall(text) if not (PACKAGE / p).is_file() and not (ROOT / p).is_file()}  # or a repo path
    )
    assert missing == [], f"ARCHITECTURE.md names modules that do not exist: {missing}"
