"""The package carries its data: migrations, the dashboard's files and py.typed (a package ready to publish).

A file that is not Python reaches the wheel only through `[tool.setuptools.package-data]`; forgetting a pattern
passes every test from a source checkout and breaks only the installed package. CI also builds the wheel and runs
`check-wheel-contents --package src/sessionwatch` on it (.ci/run), which compares the wheel with the source tree.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "sessionwatch"
NOT_DATA = {".py", ".pyc"}


def _data_files() -> set[Path]:
    """Every file of the package's source tree that is not Python (bytecode caches excluded)."""
    return {
        path
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in NOT_DATA and "__pycache__" not in path.parts
    }


def test_every_data_file_is_declared_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns: list[str] = config["tool"]["setuptools"]["package-data"]["sessionwatch"]
    # setuptools expands these globs relative to the package folder, as Path.glob does (`**` included).
    declared = {path for pattern in patterns for path in PACKAGE.glob(pattern)}
    missing = sorted(str(path.relative_to(PACKAGE)) for path in _data_files() - declared)
    assert missing == [], f"files the wheel would leave out (add a package-data pattern): {missing}"


def test_the_installed_package_finds_its_migrations_ui_and_type_marker() -> None:
    package = resources.files("sessionwatch")
    assert package.joinpath("py.typed").is_file()

    for backend in ("sqlite", "postgres"):
        folder = resources.files("sessionwatch.store").joinpath("migrations", backend)
        names = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))
        assert names and names[0].startswith("0001_"), (backend, names)
        # The same files as in the source tree, none lost and each readable as the store reads it.
        source = sorted(path.name for path in (PACKAGE / "store" / "migrations" / backend).glob("*.sql"))
        assert names == source
        for name in names:
            assert folder.joinpath(name).read_text(encoding="utf-8").strip(), name

    ui = package.joinpath("http", "ui")
    page = ui.joinpath("index.html").read_text(encoding="utf-8")
    for asset in ("app.js", "style.css", "favicon.svg"):
        assert ui.joinpath(asset).is_file(), asset
        assert asset in page, f"index.html no longer loads {asset}"
