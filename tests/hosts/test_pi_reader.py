"""The Pi session reader (``sessionwatch.hosts.pi.reader``) on a file the real Pi wrote.

One ``pi --mode rpc`` session (module-scoped: one host run for every test here) writes what a session
holds: prompts, a ``!cmd``, a custom entry and message (an extension's), a compaction, a branch back to an
earlier entry (``/tree``) with a prompt that repeats another branch's, then the same prompt again on its
own branch. The tests then read it from cursors, grow it, rewrite it and add oversized lines to it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionwatch.hosts.pi import reader
from sessionwatch.hosts.pi.sessions import PiSessions
from tests.support.fake_model import FakeModel
from tests.support.hosts import pi
from tests.support.pi_host import FIXTURE_EXTENSION, PiHome, PiRpc

pytestmark = [pytest.mark.hosts]

PERSON_PROMPTS = ["first question", "!echo hi", "second question", "third question", "second question"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("pi-reader")
    with FakeModel("chat") as model:
        h = PiHome(root, pi(), model.url)
        extension = root / "fixture.ts"
        extension.write_text(FIXTURE_EXTENSION)
        with PiRpc(h, "-e", str(extension)) as rpc:
            rpc.prompt("first question")
            rpc.command({"type": "bash", "command": "echo hi"}, "bash")
            rpc.prompt("second question")
            rpc.slash("/fixture-mark")  # a custom entry and a custom message
            rpc.command({"type": "compact"}, "compact")
            rpc.prompt("third question")
            rpc.slash("/fixture-back")  # the leaf back to the first reply: a branch
            rpc.prompt("second question")  # the same text as on the other branch: a person's again
            rpc.prompt("second question")  # and again on its own branch: a repetition
        (path,) = h.session_files()
        yield path


@pytest.fixture
def session(written: Path, tmp_path: Path) -> Path:
    path = tmp_path / written.name
    shutil.copyfile(written, path)
    return path


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _scan(path: Path, cursor: dict[str, Any], own: list[str] | None = None, **kw: Any) -> reader.Scan:
    return reader.scan(str(path), cursor, lambda: own or [], **kw)


def test_the_file_holds_what_the_fixture_meant(session: Path) -> None:
    types = [json.loads(line)["type"] for line in _lines(session)]
    for kind in ("session", "custom", "custom_message", "compaction"):
        assert kind in types, types
    roles = [json.loads(line)["message"]["role"] for line in _lines(session) if b'"type":"message"' in line]
    assert "bashExecution" in roles and "assistant" in roles


def test_only_prompts_and_cmds_count_branches_by_parent_and_repetitions_on_a_branch_do_not(session: Path) -> None:
    found = _scan(session, {"offset": 0})
    assert found.prompts == PERSON_PROMPTS  # not the replies, custom entries, the compaction, the repeat
    assert found.turns == 5
    assert found.occurred_at is not None and found.dedupe_id is not None
    again = _scan(session, found.cursor or {})
    assert (again.turns, again.cursor) == (0, None)  # nothing new: one stat


def test_a_text_the_session_sent_itself_is_not_a_persons(session: Path) -> None:
    found = _scan(session, {"offset": 0}, own=["  third   question "])
    assert "third question" not in found.prompts and found.turns == 4


def test_a_cursor_carries_the_tree_so_growth_is_judged_by_its_branch(session: Path, tmp_path: Path) -> None:
    lines = _lines(session)
    cut = next(i for i, line in enumerate(lines) if b"third question" in line)
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(b"".join(lines[:cut]))
    cursor = reader.baseline(str(grown))
    assert len(json.dumps(cursor)) < 8192  # it rides in the link's marker
    with open(grown, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    found = _scan(grown, cursor)
    assert found.prompts == ["third question", "second question"]


def test_a_line_still_being_written_waits(session: Path, tmp_path: Path) -> None:
    lines = _lines(session)
    partial = tmp_path / "partial.jsonl"
    partial.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    cursor = reader.baseline(str(partial))
    with open(partial, "ab") as fh:
        fh.write(lines[-1][20:])
    assert _scan(partial, cursor).turns == 0  # the last line is an assistant reply


def test_a_whole_file_rewrite_reports_nothing_again_and_reads_on(session: Path) -> None:
    cursor = reader.baseline(str(session))
    entries = [json.loads(line) for line in _lines(session)]
    # what a format migration does: every entry written again (here with other spacing), times kept
    session.write_text("".join(json.dumps(e, indent=None, separators=(", ", ": ")) + "\n" for e in entries))
    found = _scan(session, cursor)
    assert found.turns == 0 and found.note is not None and "rewritten" in found.note
    last = entries[-1]
    newer = {
        "type": "message",
        "id": "fffffff1",
        "parentId": last["id"],
        "timestamp": "2099-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "after the migration"}], "timestamp": 1},
    }
    with open(session, "a") as fh:
        fh.write(json.dumps(newer) + "\n")
    assert _scan(session, found.cursor or {}).prompts == ["after the migration"]


def _entry(entry_id: str, parent: str, role: str, **message: Any) -> bytes:
    body = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2099-01-01T00:00:01.000Z",
        "message": {"role": role, **message},
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def test_oversized_lines_never_block_and_are_judged_by_their_head(session: Path) -> None:
    cursor = reader.baseline(str(session))
    last = json.loads(_lines(session)[-1])["id"]
    huge = "x" * (3 << 20)
    with open(session, "ab") as fh:
        fh.write(_entry("aaaaaaa1", last, "assistant", content=[{"type": "text", "text": huge}]))
        fh.write(_entry("aaaaaaa2", "aaaaaaa1", "user", content=[{"type": "text", "text": huge}]))
        fh.write(_entry("aaaaaaa3", "aaaaaaa2", "bashExecution", command="ls", excludeFromContext=True))
        fh.write(_entry("aaaaaaa4", "aaaaaaa3", "user", content="and a short one"))
    turns, scans = 0, 0
    while True:  # one 64 KiB window per scan: many ticks, bounded memory, nothing skipped
        scans += 1
        found = _scan(session, cursor, window=64 * 1024, deadline=0.0)  # no time left: one window
        if found.cursor is None:
            break
        turns += found.turns
        cursor = found.cursor
    assert scans > 90
    assert turns == 2  # the big prompt and the short one; not the reply, not the !!cmd


def test_the_catalog_finds_the_session_by_id_and_folder(written: Path) -> None:
    agent = written.parents[2]
    header = json.loads(_lines(written)[0])
    sessions = PiSessions(agent)
    found = sessions.locate(header["id"])
    assert found is not None and found.path == str(written)
    (listed,) = sessions.list_threads(cwd=header["cwd"])
    assert listed["threadId"] == header["id"] and listed["title"] == "first question"
    assert sessions.list_threads(cwd=str(agent)) == []
