"""Run the peer benchmark (OpenClaw's implementation) and ours in one run; print the ratio table.

    python -m benchmarks.compare [--quick] [--only append,...] [--peer PATH/run.sh] [--out bench-results]

The peer is OpenClaw's published npm package driven by ``benchmarks/peer/openclaw/run.sh`` (its first
run installs Node 24 and the package into a cache folder outside the clone). Both harnesses print JSON
lines with the same op names; this joins them on ``op``. Ratios, not absolute times, are what to read:
the machine is shared and noisy. Prints a Markdown table and writes both raw outputs and the table
under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import PEER_HARNESS, ROOT, child_env

# op -> (what is compared, target) ; kinds: "tput" ours/peer throughput, "p50" peer p50 / ours p50,
# "time" peer seconds / ours seconds.
TARGETS: dict[str, tuple[str, float]] = {
    "append_w0": ("tput", 3.0),
    "append_w10_target": ("tput", 0),
    "append_w100_target": ("tput", 0),
    "append_w10_all": ("tput", 0),
    "append_w100_all": ("tput", 5.0),
    "changes_since_oldest_limit200": ("p50", 2.0),
    "changes_since_random_limit200": ("p50", 2.0),
    "changes_since_tail50_limit200": ("p50", 2.0),
    "changes_since_at_head_limit200": ("p50", 2.0),
    "get_session_state_version": ("tput", 0),
    "ack_single_target": ("tput", 3.0),
    "ack_single_target_nothing_pending": ("tput", 3.0),
    "ack_batch_1000_targets_one_call": ("tput", 3.0),
    "ack_batch_100_targets_one_call": ("tput", 3.0),
    "sweep_after_restart": ("time", 2.0),
    "prune_60000_to_cap": ("time", 0),
    "prune_6000_to_cap": ("time", 0),
    "prune_at_cap_nothing_to_delete": ("tput", 5.0),
}


def run_lines(cmd: list[str], label: str) -> list[dict]:
    print(f"# running {label}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=child_env())
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed with exit code {proc.returncode}")
    print(f"# {label} took {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def ratio(kind: str, peer: dict, ours: dict) -> float | None:
    try:
        if kind == "tput":
            return ours["per_sec"] / peer["per_sec"]
        if kind == "p50":
            return peer["p50_us"] / ours["p50_us"]
        return peer["seconds"] / ours["seconds"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def table(peer: list[dict], ours: list[dict]) -> str:
    p = {d["op"]: d for d in peer if not d.get("meta")}
    o = {d["op"]: d for d in ours if not d.get("meta")}
    rows = [
        "| op | peer per_sec | ours per_sec | peer p50 µs | ours p50 µs | ratio | target | met |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for op, (kind, target) in TARGETS.items():
        if op not in p or op not in o:
            continue
        r = ratio(kind, p[op], o[op])
        what = {"tput": "throughput ×", "p50": "p50 speed-up ×", "time": "time speed-up ×"}[kind]
        tgt = f"≥ {target:g} ({what.strip(' ×')})" if target else "–"
        met = "–" if not target or r is None else ("yes" if r >= target else "**no**")
        rows.append(
            f"| `{op}` | {p[op].get('per_sec', '')} | {o[op].get('per_sec', '')} | "
            f"{p[op].get('p50_us', '')} | {o[op].get('p50_us', '')} | "
            f"{'' if r is None else f'{r:.1f}×'} | {tgt} | {met} |"
        )
    raw = o.get("raw_insert_baseline")
    if raw and "append_w0" in o:
        share = o["append_w0"]["per_sec"] / raw["per_sec"]
        rows.append(
            f"| `append_w0` vs `raw_insert_baseline` | – | {raw['per_sec']} (raw) | – | "
            f"{raw.get('p50_us', '')} | {share:.0%} of raw | ≥ 70% | {'yes' if share >= 0.7 else '**no**'} |"
        )
    return "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peer", default=str(PEER_HARNESS), help="the peer harness (default: the one in this repository)")
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    ap.add_argument("--only", help="passed to both harnesses (append,changes,ack,sweep,prune)")
    return ap


def main(argv: list[str] | None = None) -> None:
    a = parser().parse_args(argv)
    extra = (["--quick"] if a.quick else []) + (["--only", a.only] if a.only else [])
    peer = run_lines(["bash", a.peer, *extra], "peer")
    ours = run_lines([sys.executable, "-m", "benchmarks.engine", *extra], "sessionwatch")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "peer.jsonl").write_text("".join(json.dumps(d) + "\n" for d in peer))
    (out / "sessionwatch.jsonl").write_text("".join(json.dumps(d) + "\n" for d in ours))
    md = table(peer, ours)
    (out / "ratios.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
