"""Every shell block of README.md and docs/ runs as shown, so the docs cannot drift from the code.

Each fenced ``sh``/``bash``/``console``/``shell`` block runs in one ``bash`` in a scratch home, with
the project's ``sessionwatch`` and ``python`` first on ``PATH``, and the pinned binary of each host the
block names (``install codex``, ``doctor pi``, ...; tests/support/hosts.py installs them). What a reader
fills in is filled in the same way for every block (``Fill``): free ports for the documented ones, a
scratch folder for ``/srv`` and ``/etc`` paths, a test PostgreSQL database for the ``postgresql://`` URLs,
a token for ``...`` and ``$T``, loopback for ``0.0.0.0``, a session for ``KEY``, and for ``<session id>``
the id of a session the host's real binary wrote first. A block that names the default gateway address
without starting a gateway gets one there; a block the page has the reader run after an earlier one
(``doctor`` after ``install``) gets that one first (``BEFORE``).

A fence whose lines are commands must be tagged as shell, or it would never run: an untagged (or
``text``) fence holding one fails ``test_every_block_of_commands_is_tagged_as_shell``.

Each line must do what it says: exit 0; a line ``cmd; echo $?  # N`` must print N; a server (``serve``,
``python -m sessionwatch.http``, ``node``) must be listening on its port, then stops on SIGINT; ``cmd &``
must be listening before the next line runs; ``log --follow`` must still be following after 2 s. A
block only a test of its own can run says so in ``ELSEWHERE``, with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import pg
from tests.support.fake_model import FakeModel
from tests.support.hosts import claude_binary, codex_binary, opencode_binary, pi, pi_binary
from tests.support.pi_host import PiHome

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^[ \t]*```(?:sh|bash|console|shell)[ \t]*\n(.*?)^[ \t]*```", re.S | re.M)
ANY_FENCE = re.compile(r"^[ \t]*```([^`\n]*)\n(.*?)^[ \t]*```", re.S | re.M)
PROSE_TAGS = ("", "text", "txt", "plain", "plaintext")  # fences nothing runs
# a line a reader would type into a shell: one of the programs the docs show, first
COMMAND = re.compile(
    r"^\s*(\$\s+)?(sessionwatch|python3?|pip|uv|curl|git|npm|npx|claude|codex|opencode|pi|pytest|mkdocs"
    r"|\.venv/bin/\S+|cd|export|mkdir|chmod)(\s|$)"
)
# the host binaries a block may need, by the name it gives the host (tests/support/hosts.py pins them)
HOST_BINARIES = {"claude-code": claude_binary, "codex": codex_binary, "opencode": opencode_binary, "pi": pi_binary}
HOST_NAMED = re.compile(r"\b(?:install|uninstall|doctor|threads|adopt) (claude-code|codex|opencode|pi)\b")
TOKEN = "docs-test-token-0123456789abcdef"
PORTS = ("7878", "9000", "8765", "7879")  # every port the docs show, each replaced by a free one
SERVERS = re.compile(
    r"(^|[\s/])(sessionwatch serve|python -m sessionwatch\.http|sessionwatch node"
    r"|python -m sessionwatch\.node_server)\b"
)
FOLLOWS = re.compile(r"(^|[\s/])sessionwatch( --\S+)* log --follow\b")
EXPECT_RC = re.compile(r"^(?P<cmd>.*);\s*echo \$\?\s*#\s*(?P<rc>\d+)")

# Blocks run elsewhere, by their first command line: why this test does not run them.
ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -n auto": (
        "the suite itself: .ci/run runs it word for word (tests/test_project_files.py keeps them equal)"
    ),
    "python -m benchmarks": (
        "the benchmarks run from a clone's root, which this test's scratch folder is not: "
        "tests/test_examples_and_bench.py runs both lines there"
    ),
}


# What the page has the reader run before a block, by the block's first command: each block here runs
# alone in a fresh home, where a reader following the page has done the earlier section.
BEFORE = {
    "sessionwatch doctor claude-code": ["sessionwatch install claude-code"],  # after "Install"
    "sessionwatch uninstall claude-code": ["sessionwatch install claude-code"],
    "sessionwatch doctor codex": ["sessionwatch install codex --session agent:main:main"],
    "sessionwatch uninstall codex": ["sessionwatch install codex --session agent:main:main"],
    "sessionwatch lifecycle KEY ended --outcome failed": ["sessionwatch put agent:main:main"],
}


@dataclass(frozen=True)
class Block:
    path: str
    index: int
    text: str

    @property
    def first(self) -> str:
        return next(line.strip() for line in self.text.splitlines() if line.strip())

    @property
    def command(self) -> str:
        """The first line without its comment."""
        return re.sub(r"\s+#.*$", "", self.first)

    def __str__(self) -> str:
        return f"{self.path}#{self.index}: {self.first[:60]}"


def blocks() -> list[Block]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, m in enumerate(FENCE.finditer(path.read_text())):
            found.append(Block(str(path.relative_to(ROOT)), i, m.group(1)))
    return found


def logical_lines(text: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment-only lines left out."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@dataclass
class Fill:
    """What a reader puts in, for one block."""

    ports: dict[str, str]
    scratch: Path
    pg_url: str | None
    own_venv: bool  # the block makes .venv itself (the README's install); else .venv/bin is this one
    host_session: str | None = None  # the id of a session the host wrote (for <session id>)

    def apply(self, line: str) -> str:
        if not self.own_venv:
            line = line.replace(".venv/bin/", f"{BIN}/")
        for shown, port in self.ports.items():
            line = re.sub(rf"(?<=[:= ]){shown}\b", port, line)
        line = line.replace("0.0.0.0", "127.0.0.1")
        line = line.replace("/srv/sw/", f"{self.scratch}/srv/")
        line = line.replace("/etc/sessionwatch/token", f"{self.scratch}/token")
        line = re.sub(r"(SESSIONWATCH_TOKEN=)(\.\.\.|'<[^>]*>')", rf"\g<1>{TOKEN}", line)
        # the token id a page shows is the one `token create` printed just before, in the reader's run
        line = line.replace("token revoke 3f9a0c2b71de", 'token revoke "$SW_TOKEN_ID"')
        line = line.replace("lifecycle KEY ", "lifecycle agent:main:main ")  # the session put before (BEFORE)
        if self.host_session is not None:
            line = line.replace("<session id>", self.host_session)
        if self.pg_url is not None:
            line = re.sub(r"'?postgresql://[^\s']+'?", lambda m: self._pg(m.group(0)), line)
        return line

    def _pg(self, shown: str) -> str:
        assert self.pg_url is not None
        query = shown.strip("'").partition("?")[2]
        return f"'{self.pg_url}{'?' + query if query else ''}'"


def script(block: Block, fill: Fill) -> str:
    """The block as a bash script that fails, naming the line, where a line does not do what it says."""
    out = [
        "set -u",
        'fail() { echo "DOCFAIL: $*" >&2; exit 1; }',
        # starting PORT: the server there answers its health with 503 (a gateway still in its restart sweep)
        "starting() { exec 3<>/dev/tcp/127.0.0.1/$1 || return 1;"
        " printf 'GET /v1/health HTTP/1.0\\r\\nHost: 127.0.0.1:%s\\r\\n\\r\\n' $1 >&3; local status;"
        ' read -t 5 -r _ status _ <&3; exec 3>&-; [ "$status" = 503 ]; }',
        # ready PORT PID: the process is alive, accepts connections on PORT and is past its start (as a
        # person waits for the "ready" line) within 300 s (an install first)
        'ready() { for _ in $(seq 1 3000); do kill -0 $2 2>/dev/null || fail "exited before listening on $1";'
        " if (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && ! (starting $1) 2>/dev/null; then return 0; fi;"
        ' sleep 0.1; done; fail "not listening on $1"; }',
        # background jobs of a script ignore SIGINT: servers are stopped with SIGTERM, as a service manager does
        "trap 'for p in $(jobs -p); do kill -TERM $p 2>/dev/null; done; sleep 1;"
        " for p in $(jobs -p); do kill -9 $p 2>/dev/null; done' EXIT",
    ]
    for shown in logical_lines(block.text):
        line = fill.apply(shown)
        quoted = shlex_quote(shown)
        port_m = re.search(r"--port (\d+)", line)
        port = port_m.group(1) if port_m else fill.ports["7878"]
        expect = EXPECT_RC.match(line)
        bare = re.sub(r"\s+#.*$", "", line).rstrip()
        background = bare.endswith("&") and not bare.endswith("&&")
        body = bare[:-1].rstrip() if background else bare
        if "&&" in body:  # a chain ending in the server: the job's pid is the server's (exec)
            head, _, last = body.rpartition("&&")
            body = f"( {head} && exec {last.strip()} )"
        if background and SERVERS.search(line):
            out.append(f"{body} & ready {port} $!")
        elif SERVERS.search(line):
            out.append(
                f"{body} & pid=$!; ready {port} $pid; kill -TERM $pid; wait $pid; rc=$?;"
                f' [ $rc -eq 0 ] || [ $rc -eq 143 ] || fail {quoted}" stopped with $rc"'
            )
        elif FOLLOWS.search(line):
            out.append(
                f"{body} & pid=$!; sleep 2; kill -0 $pid 2>/dev/null || fail {quoted}' stopped following';"
                f" kill -TERM $pid; wait $pid; rc=$?; [ $rc -eq 0 ] || [ $rc -eq 143 ] ||"
                f' fail {quoted}" stopped with $rc"'
            )
        elif expect:
            rc = expect["rc"]
            out.append(
                f"out=$({expect['cmd']}; echo $?);"
                f" [ \"${{out##*$'\\n'}}\" = {rc} ] || fail {quoted}\" printed ${{out##*$'\\n'}}, the docs say {rc}\""
            )
        elif " token create " in line:  # keep the id it printed (sw_<id>_<secret>) for a later revoke
            out.append(
                f'out=$({body}) || fail {quoted}" exited $?"; echo "$out";'
                " SW_TOKEN_ID=$(echo \"$out\" | sed -nE 's/^sw_([0-9a-f]+)_.*/\\1/p' | head -n 1)"
            )
        else:
            out.append(f'{{ {line}\n}} || fail {quoted}" exited $?"')
    return "\n".join([*out, "exit 0"]) + "\n"


def shlex_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def env_for(home: Path, port: str, hosts: tuple[str, ...] = ()) -> dict[str, str]:
    """The reader's shell: a scratch home, this installation's commands, Claude Code's binary and those of
    ``hosts`` (a block that names a host whose pinned binary cannot be had is skipped, saying why)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SESSIONWATCH_", "XDG_", "CLAUDE_", "CODEX_", "PI_"))
    }
    env.pop("VIRTUAL_ENV", None)
    tools = home / "bin"
    tools.mkdir(exist_ok=True)
    claude, _ = claude_binary()
    if claude is not None and not (tools / "claude").exists():
        (tools / "claude").symlink_to(claude)
    for host in hosts:
        binary, why = HOST_BINARIES[host]()
        if binary is None:
            pytest.skip(f"the block runs {host}: {why}")
        if not (tools / binary.name).exists():
            (tools / binary.name).symlink_to(binary)
    env.update(
        HOME=str(home),
        # the README's install: pip as shown, minus compiling every installed module to bytecode (a third of
        # its time) and its online version check; what it installs is the same
        PIP_NO_COMPILE="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PATH=f"{BIN}{os.pathsep}{tools}{os.pathsep}{env.get('PATH', '')}",
        SESSIONWATCH_PORT=port,  # a server shown without --port listens on the default one: 7878 here
        T=TOKEN,
        MCP_TOKEN=TOKEN,
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def gateway_at() -> Iterator[Callable[[str, dict[str, str]], None]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(port: str, env: dict[str, str]) -> None:
        proc = subprocess.Popen(
            [str(BIN / "sessionwatch"), "serve", "--no-monitor", "--port", port],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        wait_listening(int(port), proc)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(15)


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the gateway exited with {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def run_block(
    block: Block, cwd: Path, home: Path, gateway_at: Callable[[str, dict[str, str]], None], stack: ExitStack
) -> None:
    ports = {shown: free_port() for shown in PORTS}
    pg_url = None
    if "postgresql://" in block.text:
        if not pg.available():
            pytest.skip("no PostgreSQL at 127.0.0.1:5432 for this block's postgresql:// URL")
        pg_url = stack.enter_context(pg.fresh_database())
    hosts = tuple(sorted(set(HOST_NAMED.findall(block.text))))
    env = env_for(home, ports["7878"], hosts)
    host_session = None
    if "<session id>" in block.text:
        host_session = pi_session(home.parent, env)
    fill = Fill(ports, home, pg_url, own_venv="python3 -m venv .venv" in block.text, host_session=host_session)
    (home / "srv").mkdir(exist_ok=True)
    (home / "token").write_text(TOKEN + "\n")
    starts_one = any(SERVERS.search(line) for line in logical_lines(block.text))
    if not starts_one and re.search(r"127\.0\.0\.1:7878\b", block.text):
        gateway_at(ports["7878"], env)
    for given in BEFORE.get(block.command, []):
        done = subprocess.run(["bash", "-c", given], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{given} (before {block}) failed:\n{done.stderr[-3000:]}"
    text = script(block, fill)
    out = subprocess.run(["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{block} failed:\n{out.stderr[-3000:]}\n--- stdout ---\n{out.stdout[-2000:]}"


def pi_session(root: Path, env: dict[str, str]) -> str:
    """The id of a session the real Pi wrote in the project (one prompt, against a fake model); the reader's
    shell then finds Pi's sessions where that Pi keeps them (``$PI_CODING_AGENT_DIR``)."""
    with FakeModel("chat") as model:
        h = PiHome(root, pi(), model.url)
        done = h.prompt("hello")
        assert done.returncode == 0, done.stderr[-2000:]
    (path,) = h.session_files()
    env["PI_CODING_AGENT_DIR"] = str(h.agent)
    return str(json.loads(path.read_text(encoding="utf-8").splitlines()[0])["id"])


ALL = blocks()


@pytest.mark.slow
@pytest.mark.parametrize("block", ALL, ids=[f"{b.path}#{b.index}" for b in ALL])
def test_the_block_runs_as_shown(
    block: Block, tmp_path: Path, gateway_at: Callable[[str, dict[str, str]], None]
) -> None:
    if block.first in ELSEWHERE:
        pytest.skip(ELSEWHERE[block.first])
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "project"
    if "python3 -m venv .venv" in block.text:  # the README's install: in a copy of the project
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for name in filter(None, files.decode().split("\0")):
            target = cwd / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / name).is_file():
                shutil.copy2(ROOT / name, target)
    else:
        cwd.mkdir()
    with ExitStack() as stack:
        run_block(block, cwd, home, gateway_at, stack)


def test_every_block_is_found() -> None:
    # the README's three and at least one per page that shows commands: a fence the pattern misses
    # would silently leave a page untested
    assert sum(b.path == "README.md" for b in ALL) >= 3
    pages = ("cli", "http", "mcp", "upstream", "hooks-claude-code", "hooks-codex", "hosts-pi", "hosts-opencode")
    for page in pages:
        assert any(b.path == f"docs/{page}.md" for b in ALL), page
    assert set(ELSEWHERE) <= {b.first for b in ALL}, "ELSEWHERE names a block no page shows any more"
    assert set(BEFORE) <= {b.command for b in ALL}, "BEFORE names a block no page shows any more"


def untagged_commands(path: str, text: str) -> list[str]:
    """``path:line: command`` for each fence not tagged as shell (untagged or ``text``) that shows a command."""
    found = []
    for m in ANY_FENCE.finditer(text):
        if m.group(1).strip().lower() not in PROSE_TAGS:
            continue
        line = text.count("\n", 0, m.start()) + 1
        found += [f"{path}:{line}: {cmd.strip()}" for cmd in m.group(2).splitlines() if COMMAND.match(cmd)]
    return found


def test_the_command_finder_sees_an_untagged_fence() -> None:
    page = "a\n\n```\nsessionwatch doctor pi   # a comment\n```\n\n```text\n$ pip install -e .\n```\n"
    page += (
        '\n```sh\nsessionwatch serve\n```\n\n```json\n{"pi": 1}\n```\n\n```\nerror (conflict): sessionwatch x\n```\n'
    )
    assert untagged_commands("p.md", page) == [
        "p.md:3: sessionwatch doctor pi   # a comment",
        "p.md:7: $ pip install -e .",
    ]


def test_every_block_of_commands_is_tagged_as_shell() -> None:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found += untagged_commands(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    assert found == [], "commands in a fence that is not tagged sh (so no test runs them):\n" + "\n".join(found)
