"""The growth benchmark's small mode as a guard: no guarded per-call row grows more than 3x per 10x."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.engine import growth

# The benchmark's own line is 2x per 10x (`python -m benchmarks.engine --growth --growth-limit 2`, on a quiet
# machine). The suite runs beside other tests on busy cores, where one size's timings can be slowed more than
# another's: it guards the shape (a cost linear in the store is 10x per 10x) with room for that noise, and
# times each call by its thread's CPU time, not the wall clock. On cores shared by the whole suite and two busy
# loops, a sweep of 1,000 pending notices (milliseconds) is preempted far more often than one of 100, so by
# the wall clock it grew 4x per 10x in every one of five measurements; by CPU time it is flat.
LIMIT = 3.0


@pytest.mark.slow
def test_per_call_costs_stay_flat_as_the_store_grows(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = []
    emit = lambda op, **kw: lines.append({"op": op, **kw})  # noqa: E731
    factors = growth.run(emit, small=True, tmp=str(tmp_path), reps=15, clock="cpu")
    over = {(d, op): f for d, ops in factors.items() for op, f in ops.items() if growth.GUARDED(d, op) and f > LIMIT}
    for _ in range(4):  # a shared machine is noisy: measure the dimensions that failed again, keep the best
        if not over:
            break
        again = growth.run(emit, small=True, tmp=str(tmp_path), reps=15, only={d for d, _ in over}, clock="cpu")
        over = {(d, op): min(f, again[d][op]) for (d, op), f in over.items() if min(f, again[d][op]) > LIMIT}
    assert not over, f"per-call costs grow more than {LIMIT}x per 10x: {over}"
    assert any(line["op"] == "growth-verify" for line in lines)  # the bulk build matched the API build


def test_the_bulk_build_matches_the_api_build(tmp_path: Path) -> None:
    checked = growth.verify_bulk(str(tmp_path))
    assert checked["sessions.cursors"] == 40 and checked["events.events"] == 300


def test_several_runs_report_the_median_of_each_size(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = []
    emit = lambda op, **kw: lines.append({"op": op, **kw})  # noqa: E731
    growth.run(emit, small=True, tmp=str(tmp_path), reps=3, only={"pending"}, runs=3)
    sizes = [line for line in lines if line["op"] == "growth-size"]
    assert [(s["run"], s["size"]) for s in sizes] == [(r, n) for r in range(3) for n in growth.SMALL["pending"]]
    rows = [line for line in lines if line["op"] == "growth"]
    assert len(rows) == len(growth.SMALL["pending"]) * 4  # sweep, peek, hasPending, open: once per size
    for row in rows:
        assert len(row["runs"]) == 3 and row["us"] == sorted(row["runs"])[1], row
