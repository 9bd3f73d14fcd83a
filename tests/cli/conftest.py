"""Run the installed ``sessionwatch`` command as a subprocess against a fresh SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.commands import SESSIONWATCH


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self) -> Any:
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"<exit {self.code}\nstdout: {self.out}\nstderr: {self.err}>"


Runner = Callable[..., Result]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
    env.update(extra)
    return env


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


@pytest.fixture
def sw(store: str) -> Runner:
    """``sw("status", KEY, "--json")`` runs the command with SESSIONWATCH_STORE pointing at a fresh store."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
        proc = subprocess.run(
            [*SESSIONWATCH, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env if env is not None else clean_env(SESSIONWATCH_STORE=store),
        )
        return Result(proc)

    return run
