"""Files that must agree with each other: the README's test command and CI's, the version and the changelog."""

from __future__ import annotations

import re
from pathlib import Path

from sessionwatch import __version__

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    """The README's shell blocks, one command each."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)]


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    test_commands = [c for c in _readme_commands() if ".venv/bin/pytest" in c]
    assert len(test_commands) == 1, test_commands
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_commands[0] in ci_lines, "README's test command and .ci/run's differ"
    # Every step stops the run on its first failure (set -e), so a passing suite can never hide a failing
    # step; after the suite only the check that it left the tracked files alone may come.
    assert "set -euo pipefail" in ci_lines
    after = ci_lines[ci_lines.index(test_commands[0]) + 1 :]
    assert all("pytest" not in line and "pip install" not in line for line in after), after


def test_the_newest_changelog_release_is_the_package_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, flags=re.MULTILINE)
    assert releases, "no release heading in CHANGELOG.md"
    assert releases[0] == __version__
    # Every release heading has its comparison link at the bottom (Keep a Changelog).
    for release in releases:
        assert re.search(rf"^\[{re.escape(release)}\]: https://", changelog, flags=re.MULTILINE), release


def test_the_readme_names_every_event_kind() -> None:
    from sessionwatch.kinds import ALL_KINDS

    readme = (ROOT / "README.md").read_text()
    missing = sorted(k for k in ALL_KINDS if f"`{k}`" not in readme)
    assert not missing, f"README.md's concepts table lacks {missing}"
