"""Schemathesis against /v1/openapi.json of a real gateway: no 5xx, and responses conform to the document."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

TOKEN = "fuzz-token"
# positive_data_acceptance: the engine validates meaning beyond the schema (a session must exist, label and
# sessionKey exclude each other), so schema-valid input may rightly be refused.
# use_after_free: state-version and system-events answer for deleted sessions by design (0, empty).
EXCLUDED_CHECKS = "positive_data_acceptance,use_after_free"


@pytest.mark.slow
def test_schemathesis_finds_no_server_errors_and_conformance_holds(gateway_factory, tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("schemathesis")
    if not st.exists():
        st = Path(shutil.which("schemathesis") or "schemathesis")
    gp = gateway_factory(token=TOKEN).start()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=gp.url, headers=auth, timeout=10) as http:
        # Some real data, so generated requests also reach existing sessions.
        http.put("/v1/sessions/agent:main:main", json={})
        http.put("/v1/sessions/global", json={"agentId": "main"})
        http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": "agent:main:main"})
        http.post("/v1/sessions/agent:main:subagent:kid/inbound", json={"text": "hi", "channel": "web"})
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(st),
            "run",
            f"{gp.url}/v1/openapi.json",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--checks",
            "all",
            "--exclude-checks",
            EXCLUDED_CHECKS,
            # The wake stream never ends by design; tests/http/test_sse.py covers it.
            "--exclude-path",
            "/v1/stream",
            "--exclude-path",
            "/v1/events/stream",
            "--phases",
            "coverage,fuzzing,stateful",
            "--max-examples",
            "8",
            "--seed",
            "7",
            # One worker: with threads, CPython 3.11's ast.parse (used by hypothesis to describe lambdas) can
            # fail with "AST constructor recursion depth mismatch", a runtime error unrelated to our API.
            "--workers",
            "1",
            "--request-timeout",
            "15",
            "--no-color",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # a hang, not a slow machine: on a slow day with the suite's other work on both cores it took 99 s
        timeout=240,
    )
    print(f"schemathesis took {time.monotonic() - started:.0f} s")
    report = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    assert "passed" in proc.stdout and "Server error" not in proc.stdout, report
    tested = re.search(r"Tested:\s+(\d+)", proc.stdout)
    assert tested is not None and int(tested.group(1)) >= 30, report
