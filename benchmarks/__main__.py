"""``python -m benchmarks``: the list of benchmarks; ``python -m benchmarks NAME ...`` runs one of them."""

from __future__ import annotations

import runpy
import sys

from benchmarks import BENCHMARKS


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m benchmarks NAME [OPTIONS]   (or python -m benchmarks.NAME [OPTIONS])\n")
        width = max(map(len, BENCHMARKS))
        for name, what in BENCHMARKS.items():
            print(f"  {name:<{width}}  {what}")
        print("\nEvery benchmark prints JSON lines and takes --help; figures: docs/benchmarks.md")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; python -m benchmarks lists them", file=sys.stderr)
        return 2
    # Run it exactly as `python -m benchmarks.NAME` would: its own argv, its own __main__.
    sys.argv = [f"python -m benchmarks.{name}", *rest]
    runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
