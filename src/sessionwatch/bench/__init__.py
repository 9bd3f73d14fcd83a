"""The benchmark: the scenarios of shared/bench/SCENARIOS.md through the public engine API.

Run ``python -m sessionwatch.bench`` (``--quick`` for a 10x smaller smoke run, ``--only append,changes``,
``--store postgresql://...`` for a PostgreSQL server). Prints one JSON object per line, the same op
names and shape as the peer harness, so the two outputs join on ``op``.
"""
