"""A recording worker: ``recorder.py URL WORKER N TARGETS [PACE_MS]``.

Opens a Gateway (real clock, no timer thread), prints ``ready``, waits for ``go`` on stdin, then
records N human turns round-robin over the comma-separated targets, printing each committed sequence
(flushed) as it returns, then ``done``. A parent may kill it at any moment.
"""

from __future__ import annotations

import sys
import time

from sessionwatch import Gateway


def main() -> int:
    url, worker, n, targets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
    pace = float(sys.argv[5]) / 1000 if len(sys.argv) > 5 else 0.0
    gw = Gateway.open(url, timers=False)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(n):
        out = gw.inbound(targets[i % len(targets)], f"w{worker} turn {i}", channel="bench", human_id=f"h{worker}")
        if not out["recorded"]:
            print(f"not recorded: {out}", file=sys.stderr, flush=True)
            return 1
        print(out["event"]["sequence"], flush=True)
        if pace:
            time.sleep(pace)  # the pace the test asked for (a slow writer beside a fast one), not a wait
    print("done", flush=True)
    gw.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
