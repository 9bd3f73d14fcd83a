"""How the README's ``pytest -n auto`` shares the tests among its workers (the hook in tests/conftest.py).

xdist's default hands out runs of consecutive tests, and near the end of a run on a busy machine one worker
was left alone for minutes with a run of real-host tests while the others sat idle."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import pytest_cmdline_main


class _Options:
    """The two options the hook reads, as pytest hands them over before xdist has seen them."""

    def __init__(self, **given: Any) -> None:
        self.option = SimpleNamespace(**given)

    def getoption(self, name: str, default: Any = None) -> Any:
        return getattr(self.option, name, default)


@pytest.mark.parametrize(
    ("numprocesses", "dist", "shared_by"),
    [
        ("auto", "no", "worksteal"),  # the README's command
        (4, "no", "worksteal"),
        ("auto", "load", "load"),  # a --dist given is kept
        ("auto", "loadfile", "loadfile"),
        (None, "no", "no"),  # no workers: nothing to share
        (0, "no", "no"),
    ],
)
def test_workers_steal_work_unless_told_otherwise(numprocesses: object, dist: str, shared_by: str) -> None:
    given = _Options(numprocesses=numprocesses, dist=dist)
    pytest_cmdline_main(given)  # type: ignore[arg-type]
    assert given.option.dist == shared_by
