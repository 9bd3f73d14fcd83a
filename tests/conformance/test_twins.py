"""The "twin:" comments stay true.

Where the two backends encode one rule twice (SQLite's SQL driven from Python, PostgreSQL's plpgsql in
store/postgres_functions.sql), each copy carries a comment naming the other copy and the conformance
tests that bind them. This checks that every file, function and test such a comment names exists, so
a rename or a move cannot leave a comment pointing nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STORE = ROOT / "src" / "sessionwatch" / "store"
# a store module, or a vocabulary module of the package (notices.py: the context-key codec)
CODE_REF = re.compile(r"(store/[\w/]+\.(?:py|sql)|(?<![\w/])[a-z_]+\.py)::([\w.]+)")
TEST_REF = re.compile(r"((?:tests/conformance|sessionwatch/testing)/\w+\.py)(?:::(\w+))?")


def _twin_comments() -> list[tuple[Path, str]]:
    """(file, comment text) of each twin comment, continuation lines included."""
    found = []
    for path in sorted([*STORE.rglob("*.py"), *STORE.rglob("*.sql"), STORE.parent / "notices.py"]):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*(#|--) twin: ", line):
                text = line
                for nxt in lines[i + 1 : i + 3]:
                    if not nxt.lstrip().startswith(("#", "--")):
                        break
                    text += " " + nxt.strip()
                found.append((path, text))
    return found


def _defines(path: Path, symbol: str) -> bool:
    source = path.read_text()
    *owner, name = symbol.split(".")
    if path.suffix == ".sql":
        return re.search(rf"FUNCTION {re.escape(name)}\(", source) is not None
    return re.search(rf"^\s*def {re.escape(name)}\(", source, re.MULTILINE) is not None and all(
        re.search(rf"^class {re.escape(o)}\b", source, re.MULTILINE) for o in owner
    )


def test_every_twin_comment_names_a_code_copy_and_a_test() -> None:
    comments = _twin_comments()
    assert len(comments) >= 20  # the rules encoded on both backends (queue, notices, prune, sessions)
    problems = [
        f"{path.relative_to(ROOT)}: {text}"
        for path, text in comments
        if not CODE_REF.search(text) or not TEST_REF.search(text)
    ]
    assert not problems, "twin comments without a code copy or a test:\n" + "\n".join(problems)


def test_what_twin_comments_name_exists() -> None:
    problems = []
    for path, text in _twin_comments():
        for file, symbol in CODE_REF.findall(text):
            target = STORE.parent / file
            if not target.is_file() or not _defines(target, symbol):
                problems.append(f"{path.relative_to(ROOT)} names {file}::{symbol}, which does not exist")
        for file, test in TEST_REF.findall(text):
            target = ROOT / file if file.startswith("tests/") else STORE.parent / file.removeprefix("sessionwatch/")
            if not target.is_file() or (test and f"def {test}(" not in target.read_text()):
                problems.append(f"{path.relative_to(ROOT)} names {file}::{test}, which does not exist")
    assert not problems, "\n".join(problems)
