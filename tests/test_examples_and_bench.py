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
            "sessionwatch.bench",
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

    from sessionwatch.bench.list_growth import index_write_cost, list_growth, verify_bulk

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
