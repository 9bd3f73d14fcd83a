"""The example program and the benchmark harness keep working (they are documented in the README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_example_program_runs_the_whole_story(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "manager_child_person.py"), f"sqlite:///{tmp_path}/ex.db"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "3. manager got 1 notice and 1 wake" in out.stdout
    assert "changesSince 2." in out.stdout
    assert "4. changesSince 2 -> 2 events: ['human_direct_message', 'human_direct_message']" in out.stdout
    assert "6. next turn: 0 follow-up notices; cursor at 4 of stateVersion 4" in out.stdout  # the read acked
    assert out.stdout.rstrip().endswith("then 0 pending")


@pytest.mark.slow
def test_benchmark_quick_run_prints_the_peer_shape(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.engine",
            "--quick",
            "--only",
            "raw,append,ack,prune",
            "--no-all",
            "--tmp",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = {d["op"]: d for d in map(json.loads, out.stdout.splitlines()) if not d.get("meta")}
    for op in (
        "raw_insert_baseline",
        "append_w0",
        "append_w10_target",
        "ack_single_target",
        "ack_batch_100_targets_one_call",
        "prune_6000_to_cap",
        "prune_at_cap_nothing_to_delete",
    ):
        assert {"op", "n", "seconds", "per_sec"} <= lines[op].keys(), op
    assert lines["append_w0"]["rows_after"] == 2000 and lines["append_w0"]["failures"] == 0
    assert lines["append_w10_target"]["pending_cursors_after"] == 10
    assert lines["ack_single_target"]["pending_after"] == 0
    assert lines["ack_batch_100_targets_one_call"]["pending_after"] == 0
    assert lines["prune_at_cap_nothing_to_delete"]["rows"] == 6000


def test_list_growth_runs_and_its_bulk_path_matches_the_api(tmp_path: Path) -> None:
    from contextlib import contextmanager

    from benchmarks.engine.list_growth import index_write_cost, list_growth, verify_bulk

    lines: list[tuple[str, dict]] = []
    verify_bulk(f"sqlite:///{tmp_path}/api.db", f"sqlite:///{tmp_path}/bulk.db", n=120)

    @contextmanager
    def store(label: str):  # type: ignore[no-untyped-def]
        yield f"sqlite:///{tmp_path}/{label}.db"

    figures = list_growth(store, lambda op, **kw: lines.append((op, kw)), sizes=(200, 2000), reps=3)
    assert set(figures) == {200, 2000} and all(v > 0 for v in figures[2000].values())
    assert [op for op, _ in lines] == ["sessions_list", "sessions_list", "sessions_list_growth"]
    cost = index_write_cost(f"sqlite:///{tmp_path}/w.db", lambda op, **kw: None, n=500, writes=10)
    assert cost["put_new_ratio"] > 0 and cost["set_goal_ratio"] > 0


def test_python_m_benchmarks_lists_every_benchmark_and_runs_one_by_name() -> None:
    import benchmarks

    modules = {p.stem if p.is_file() else p.name for p in (ROOT / "benchmarks").iterdir()}
    programs = {m for m in modules if m.isidentifier() and not m.startswith("_") and m != "peer"}
    assert programs == set(benchmarks.BENCHMARKS), "every benchmark is listed by python -m benchmarks"
    listed = subprocess.run([sys.executable, "-m", "benchmarks"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    assert all(f"  {name} " in listed.stdout for name in benchmarks.BENCHMARKS)
    # `python -m benchmarks NAME` is `python -m benchmarks.NAME`: its own options, its own program name
    helped = subprocess.run(
        [sys.executable, "-m", "benchmarks", "engine", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert helped.returncode == 0, helped.stderr
    assert "python -m benchmarks.engine" in helped.stdout and "--growth" in helped.stdout


def test_the_peer_harness_is_the_one_in_the_repository() -> None:
    from benchmarks import PEER_HARNESS, compare, report

    assert PEER_HARNESS.is_file() and PEER_HARNESS.is_relative_to(ROOT)
    assert (PEER_HARNESS.parent / "bench.mjs").is_file()
    assert compare.parser().get_default("peer") == str(PEER_HARNESS)
    assert report.parser().get_default("peer") == str(PEER_HARNESS)


def _timed_ops(stdout: str) -> dict[str, dict]:
    lines = (json.loads(line) for line in stdout.splitlines() if line.startswith("{"))
    return {d["op"]: d for d in lines if not d.get("meta")}


@pytest.mark.slow
def test_the_peer_harness_measures_the_ops_ours_does(tmp_path: Path) -> None:
    from benchmarks import PEER_HARNESS

    if subprocess.run(["bash", str(PEER_HARNESS), "--installed"], timeout=60).returncode != 0:
        pytest.skip(f"OpenClaw is not installed for the peer: {PEER_HARNESS.relative_to(ROOT)} --install (once)")
    only = ["--quick", "--only", "ack,sweep,prune", "--tmp", str(tmp_path)]
    peer = subprocess.run(["bash", str(PEER_HARNESS), *only], capture_output=True, text=True, timeout=600)
    assert peer.returncode == 0, peer.stderr
    ours = subprocess.run(
        [sys.executable, "-m", "benchmarks.engine", *only], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert ours.returncode == 0, ours.stderr
    theirs, mine = _timed_ops(peer.stdout), _timed_ops(ours.stdout)
    assert set(theirs) == set(mine)  # compare.py joins on these names
    assert {"ack_batch_100_targets_one_call", "sweep_after_restart", "prune_at_cap_nothing_to_delete"} <= set(theirs)
    # the peer did the work, not just printed names
    assert theirs["ack_single_target"]["pending_before"] == 100 and theirs["ack_single_target"]["pending_after"] == 0
    assert theirs["sweep_after_restart"]["renotified"] == 100
    assert theirs["prune_at_cap_nothing_to_delete"]["rows"] == 6000
    assert list(tmp_path.iterdir()) == []  # both removed their state folders
