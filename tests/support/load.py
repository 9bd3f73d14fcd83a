"""How much slower than its own CPU time the machine runs a process right now.

A latency promise ("recorded within 3 s") holds for a process that gets a core. On a machine the suite
shares with busy loops and other workers, a process gets a fraction of one, and every wall time
stretches by the same factor. A test that checks such a promise measures that factor in the same run
(a short CPU-bound child: its wall time over its CPU time) and scales its bound by it, so it checks
sessionwatch and not the machine. On an idle machine the factor is 1 and the bound is the promise.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

# about 0.1 s of CPU: long enough that the scheduler's share shows, short enough to take twice per test
_WORK = "s = 0\nfor i in range(2_000_000): s += i\n"


def slowdown() -> float:
    """Wall time over CPU time of a CPU-bound child started now (at least 1.0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run([sys.executable, "-S", "-c", _WORK], check=True, timeout=300)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return max(1.0, wall / cpu) if cpu > 0 else 1.0
