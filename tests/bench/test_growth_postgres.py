"""The growth benchmark on PostgreSQL (``--growth --postgres``): it runs in small mode, its bulk build
matches the API build there too, and every row carries sane round-trip counts and the SELECT 1 floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.engine import growth
from tests.support import pg

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(not pg.available(), reason="PostgreSQL not reachable"),
]


def _schemas(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'sw\\_growth\\_%'")]


def test_postgres_mode_runs_small_and_counts_round_trips(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = []
    emit = lambda op, **kw: lines.append({"op": op, **kw})  # noqa: E731
    with pg.fresh_database() as dsn:
        factors = growth.run(emit, small=True, tmp=str(tmp_path), reps=5, postgres=dsn)
        assert _schemas(dsn) == []  # every throwaway schema was dropped
    assert set(factors) == {"sessions", "events", "watchers", "pending"}
    verify = next(line for line in lines if line["op"] == "growth-verify")
    assert verify["backend"] == "postgresql" and verify["rows"]["events.events"] == 300

    rows = [line for line in lines if line["op"] == "growth"]
    sizes = {(r["dimension"], r["size"]) for r in rows}
    assert len(sizes) == sum(len(s) for s in growth.SMALL.values())
    for r in rows:
        assert r["backend"] == "postgresql" and r["us"] > 0
        assert r["round_trips"] >= 1 and r["round_trips"] == len(r["detail"]), r
        assert r["range"][0] <= r["round_trips"] <= r["range"][1]
        if r["operation"] == "select1":
            assert r["round_trips"] == 1 and r["detail"] == ["SELECT 1"]
        else:
            assert r["select1_us"] > 0  # the floor of the same size, same pool
        budget = growth.ROUND_TRIPS.get(r["operation"])
        if budget is not None:
            assert r["round_trips"] - r["flushes"] <= budget, r
    by_op = {(r["dimension"], r["operation"]): r for r in rows}
    # A write, its commit and the wait for the commit's WAL flush go out together: one round trip.
    assert by_op[("sessions", "recording")]["detail"] == ["sw_record + flush"]
    assert by_op[("sessions", "ack")]["detail"] == ["sw_ack + flush"]
    # drain and ack-by-id take and acknowledge in one call; status is one read; the sweep one call, plus
    # the flush in the same round trip (it costs no fsync when the call wrote nothing).
    for dim in ("sessions", "watchers"):
        assert by_op[(dim, "drain")]["detail"] == ["sw_drain + flush"]
    for dim in ("sessions", "events", "watchers"):
        assert by_op[(dim, "status")]["round_trips"] == 1, by_op[(dim, "status")]
    assert by_op[("sessions", "sweep")]["detail"] == ["sw_sweep + flush"]
    assert by_op[("pending", "sweep")]["detail"] == ["sw_sweep + flush"]
    assert by_op[("sessions", "changesSince")]["round_trips"] == 1
    assert by_op[("sessions", "list")]["round_trips"] == 1
    # Opening a store: the migration check, settings, the restart sweep and the prune all counted.
    opened = " ; ".join(by_op[("sessions", "open")]["detail"])
    assert "sw_prune" in opened and "sw_sweep" in opened, opened
    assert by_op[("events", "changesSince")]["detail"] == ["sw_changes"]
    # The run says whether it could keep itself and the server processes on one CPU, and if not, why.
    pin = next(line for line in lines if line["op"] == "growth-pin")
    assert pin["server_processes_pinned"] > 0 or pin["refused"], pin
