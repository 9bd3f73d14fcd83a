"""The engine benchmark: the peer comparison's scenarios (docs/benchmarks.md) through the public engine API.

Run ``python -m benchmarks.engine`` (``--quick`` for a 10x smaller smoke run, ``--only append,changes``,
``--store postgresql://...`` for a PostgreSQL server, ``--growth`` for the growth benchmark). Prints one
JSON object per line, the same op names and shape as the peer harness (``benchmarks/peer/openclaw``), so
the two outputs join on ``op``.
"""
