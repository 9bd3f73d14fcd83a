"""The real host binaries, pinned, run headless against a fake model server in a scratch home.

- Claude Code: the binary the ``claude-agent-sdk`` wheel bundles (a test dependency, pinned in the lock
  file); its version must be ``CLAUDE_CODE_VERSION``.
- Codex CLI (npm ``@openai/codex@CODEX_VERSION``), OpenCode (``opencode-ai@OPENCODE_VERSION``) and Pi
  (``@mariozechner/pi-coding-agent@PI_VERSION``): installed on first use into a cache folder
  (``$SESSIONWATCH_HOSTS_CACHE``, else ``$XDG_CACHE_HOME/sessionwatch-hosts``, else
  ``~/.cache/sessionwatch-hosts``) with the machine's npm; ``.ci/run`` installs them up front.

A test that needs a host calls :func:`claude_code`, :func:`codex`, :func:`opencode` or :func:`pi`; each skips with a
printed reason only when the binary cannot be had (no wheel, no node/npm, the registry unreachable). Nothing
of the real user's configuration is read or written: every run gets its own ``HOME`` (and ``CODEX_HOME``).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CLAUDE_CODE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"
PI_VERSION = "0.73.1"


def cache_dir() -> Path:
    explicit = os.environ.get("SESSIONWATCH_HOSTS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sessionwatch-hosts"


# Each finder checks the binary's version by running it (a second of CPU for OpenCode and Pi): once per
# test process, not once per test.
@functools.cache
def claude_binary() -> tuple[Path | None, str]:
    """(the bundled Claude Code binary, "") or (None, why not)."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None, "claude-agent-sdk is not installed (pip install -e '.[test]')"
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not path.is_file():
        return None, f"claude-agent-sdk {getattr(claude_agent_sdk, '__version__', '?')} bundles no binary here"
    version = _version([str(path), "--version"])
    if not version.startswith(CLAUDE_CODE_VERSION):
        return None, f"the bundled Claude Code is {version!r}, the suite is pinned to {CLAUDE_CODE_VERSION}"
    return path, ""


def _npm_binary(label: str, package: str, version: str, bin_name: str, env_var: str) -> tuple[Path | None, str]:
    """(a host CLI from npm at its pinned version, installed into the cache on first use, "") or (None, why)."""
    explicit = os.environ.get(env_var)
    if explicit:
        return Path(explicit), ""
    slug = package.rsplit("/", 1)[-1]
    prefix = cache_dir() / f"{slug}-{version}"
    binary = prefix / "node_modules" / ".bin" / bin_name
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, f"npm is not on PATH, so {label} cannot be installed"
        prefix.mkdir(parents=True, exist_ok=True)
        with open(prefix.parent / f".{slug}-{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions install once
            if not binary.exists():
                out = subprocess.run(
                    [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"{package}@{version}"],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if out.returncode != 0 or not binary.exists():
                    return None, f"npm install {package}@{version} failed: {out.stderr.strip()[-500:]}"
    found = _version([str(binary), "--version"])
    if version not in found:
        return None, f"{binary} is {found!r}, the suite is pinned to {version}"
    return binary, ""


@functools.cache
def codex_binary() -> tuple[Path | None, str]:
    """(Codex CLI at the pinned version, installing it into the cache on first use, "") or (None, why)."""
    return _npm_binary("Codex CLI", "@openai/codex", CODEX_VERSION, "codex", "SESSIONWATCH_TEST_CODEX")


@functools.cache
def opencode_binary() -> tuple[Path | None, str]:
    """(OpenCode at the pinned version, from npm into the cache on first use, "") or (None, why)."""
    return _npm_binary("OpenCode", "opencode-ai", OPENCODE_VERSION, "opencode", "SESSIONWATCH_TEST_OPENCODE")


@functools.cache
def pi_binary() -> tuple[Path | None, str]:
    """(Pi at the pinned version, from npm into the cache on first use, "") or (None, why)."""
    return _npm_binary("Pi", "@mariozechner/pi-coding-agent", PI_VERSION, "pi", "SESSIONWATCH_TEST_PI")


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unrunnable: {exc}"
    return (out.stdout or out.stderr).strip()


def _need(found: tuple[Path | None, str]) -> Path:
    """The host binary, or a skip saying why there is none; with SESSIONWATCH_REQUIRE_HOSTS=1 (.ci/run) a
    missing host fails the test instead, so a run cannot pass green with its host tests skipped."""
    path, why = found
    if path is None:
        if os.environ.get("SESSIONWATCH_REQUIRE_HOSTS") == "1":
            pytest.fail(f"a pinned host is required here (SESSIONWATCH_REQUIRE_HOSTS=1): {why}", pytrace=False)
        print(f"skipped: {why}")
        pytest.skip(why)
    return path


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def events(self) -> list[dict[str, Any]]:
        """Claude Code's stream-json lines (or Codex's --json lines)."""
        out = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


class HostHome:
    """A scratch home and project folder for one host, and the environment to run it in."""

    name: str

    def __init__(self, root: Path, binary: Path, model_url: str) -> None:
        self.root = root
        self.binary = binary
        self.home = root / "home"
        self.project = root / "project"
        self.home.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        self.model_url = model_url
        self.extra_env: dict[str, str] = {}

    def env(self) -> dict[str, str]:
        """The host's environment: a scratch HOME, and a PATH on which it finds this installation's
        ``sessionwatch`` (what an install writes into files a team commits) and the host binary itself."""
        keep = {k: os.environ[k] for k in ("LANG", "TMPDIR") if k in os.environ}
        path = os.pathsep.join(
            [str(Path(sys.executable).parent), str(self.binary.parent), os.environ.get("PATH", "/usr/bin:/bin")]
        )
        # A busy machine can keep a healthy gateway from answering a hook within the 2 s a run allows a
        # gateway that does not answer (the notice then waits for a later run): these tests are about
        # the hosts, not that budget (tests/hooks/test_never_fails.py is), so it is wider here.
        busy = {"SESSIONWATCH_HOOK_BUDGET": "8"}
        return {**keep, "PATH": path, "HOME": str(self.home), **busy, **self._host_env(), **self.extra_env}

    def _host_env(self) -> dict[str, str]:
        raise NotImplementedError

    def hook_log(self) -> str:
        """The end of the hooks' log (for an assertion's message: what the hook did, or why it missed)."""
        for path in (
            self.root / "state" / "sessionwatch" / "hooks.log",
            self.home / ".local/state/sessionwatch/hooks.log",
        ):
            if path.exists():
                return path.read_text(errors="replace")[-4000:]
        return "(no hooks.log)"

    def prompt(self, text: str, *more: str, timeout: float = 180.0) -> Run:
        """One prompt, headless, in the project folder."""
        raise NotImplementedError

    def run(self, *args: str, timeout: float = 180.0, input: str | None = None) -> Run:
        out = subprocess.run(
            [str(self.binary), *args],
            cwd=self.project,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        return Run(out.returncode, out.stdout, out.stderr)


class ClaudeHome(HostHome):
    name = "claude-code"

    def _host_env(self) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": self.model_url,
            "ANTHROPIC_API_KEY": "fake-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def prompt(self, text: str, *more: str, timeout: float = 180.0) -> Run:
        return self.run("-p", text, "--output-format", "stream-json", "--verbose", *more, timeout=timeout)


class CodexHome(HostHome):
    name = "codex"

    def __init__(self, root: Path, binary: Path, model_url: str) -> None:
        super().__init__(root, binary, model_url)
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir(exist_ok=True)
        (self.codex_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{model_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "FAKE_KEY"\n'
        )

    def _host_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.codex_home), "FAKE_KEY": "fake-key"}

    def prompt(self, text: str, *more: str, timeout: float = 180.0) -> Run:
        return self.run("exec", "--skip-git-repo-check", *more, text, timeout=timeout)


def claude_code() -> Path:
    return _need(claude_binary())


def codex() -> Path:
    return _need(codex_binary())


def opencode() -> Path:
    return _need(opencode_binary())


def pi() -> Path:
    return _need(pi_binary())


@contextmanager
def host_home(name: str, root: Path, model_url: str) -> Iterator[HostHome]:
    if name == "claude-code":
        yield ClaudeHome(root, claude_code(), model_url)
    else:
        yield CodexHome(root, codex(), model_url)


if __name__ == "__main__":  # .ci/run: install what is missing, print what the host tests will run
    missing = 0
    for label, (path, why) in (
        ("Claude Code", claude_binary()),
        ("Codex CLI", codex_binary()),
        ("OpenCode", opencode_binary()),
        ("Pi", pi_binary()),
    ):
        print(f"hosts: {label}: {_version([str(path), '--version']) if path else 'unavailable: ' + why}")
        missing += path is None
    if missing and os.environ.get("SESSIONWATCH_REQUIRE_HOSTS") == "1":
        sys.exit(f"hosts: {missing} pinned host(s) unavailable, and SESSIONWATCH_REQUIRE_HOSTS=1 requires them")
