"""A fresh machine runs the suite: no activated virtual environment, no path of one machine (issue 8, item 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from sessionwatch import __version__
from tests.support.commands import sessionwatch_command

ROOT = Path(__file__).resolve().parents[1]
# Folders that are not the project's own text (environments, caches, VCS data).
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    "build",
    "dist",
}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sql", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".json", ".sh", ".mjs", ""}


def _bare_env() -> dict[str, str]:
    """The environment of a shell with no virtual environment activated."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}


def test_python_m_sessionwatch_runs_the_cli(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sessionwatch", "--version"], capture_output=True, text=True, env=_bare_env(), timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert __version__ in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "sessionwatch", "--store", f"sqlite:///{tmp_path}/m.db", "--json", "sessions"],
        capture_output=True,
        text=True,
        env=_bare_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"sessions": []}


def test_the_tests_find_the_command_without_virtual_env() -> None:
    out = subprocess.run(
        [*sessionwatch_command(), "--version"], capture_output=True, text=True, env=_bare_env(), timeout=60
    )
    assert out.returncode == 0, out.stderr


def _text_lines() -> Iterator[tuple[str, str]]:
    """("file:line", line) for every line of the project's own text files."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in filenames:
            if name in SKIP_DIRS:  # a worktree's '.git' is a file naming where its repository lives
                continue
            path = Path(dirpath) / name
            if path.suffix not in TEXT_SUFFIXES:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                yield f"{path.relative_to(ROOT)}:{number}", line


def test_no_path_of_one_machine_in_the_repository() -> None:
    # Built from parts so this file does not match itself.
    needles = ["/" + "work/", "/" + "root/"]
    hits = [f"{where}: {line.strip()[:120]}" for where, line in _text_lines() if any(n in line for n in needles)]
    assert hits == [], "machine-specific paths:\n" + "\n".join(hits)


def _released_history() -> set[str]:
    """The changelog's lines of released versions: a record of what was true then, left as it was."""
    lines = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    first = next((n for n, line in enumerate(lines, 1) if re.match(r"## \[\d+\.\d+\.\d+\]", line)), len(lines) + 1)
    return {f"CHANGELOG.md:{n}" for n in range(first, len(lines) + 1)}


def test_nothing_points_at_the_workspace_folders_beside_the_repository() -> None:
    # The project's workspace keeps a shared folder next to the clone; a clone elsewhere has none, so no code
    # default, doc or script may lean on it (the peer benchmark's harness lives in benchmarks/peer/), nor
    # cite the product contract kept there: a doc or docstring says what it means, or links a doc in docs/.
    # Nor may anything tell a reader to install a package that is not published: installs are from a clone
    # (pip install -e '.[extra]'). Patterns built from parts, so this file does not match itself.
    beside = re.compile(r"(?:^|[\s`'\"(=])(?:\.\./)*" + "sha" + r"red/(?:bench|reference|SP" + "EC)")
    contract = re.compile(r"\bSP" + r"EC\b|\u00a7")  # the contract, or a numbered section of the notes beside it
    published = re.compile(r"(?<![/\w.-])session" + r"watch\[")  # a clone's folder path (-e ./sessionwatch[x]) is fine
    history = _released_history()
    hits = [
        f"{where}: {line.strip()[:120]}"
        for where, line in _text_lines()
        if where not in history and (beside.search(line) or contract.search(line) or published.search(line))
    ]
    assert hits == [], "pointers outside the repository, or at an unpublished package:\n" + "\n".join(hits)
