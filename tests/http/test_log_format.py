"""``--log-format json``: every line the gateway writes is one JSON object (uvicorn's too), with request ids."""

from __future__ import annotations

import json
import logging

import httpx

from sessionwatch.logformat import REQUEST_ID, JsonFormatter


def test_every_line_is_json_with_the_request_id(gateway_factory) -> None:
    gp = gateway_factory(
        env={"SESSIONWATCH_ACCESS_LOG": "1"}, extra_args=["--log-format", "json", "--log-level", "info"]
    ).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        given = http.put("/v1/sessions/agent:logs:main", json={}, headers={"X-Request-Id": "proxy-id-42"})
        assert given.status_code == 200 and given.headers["x-request-id"] == "proxy-id-42"
        made = [http.get("/v1/sessions/agent:logs:main").headers["x-request-id"] for _ in range(2)]
        assert len(set(made)) == 2 and all(len(r) == 16 for r in made), "ids are not generated per request"
        refused = http.get("/v1/sessions/agent:logs:main", headers={"X-Request-Id": "bad id with spaces"})
        assert refused.headers["x-request-id"] != "bad id with spaces"
        missing = http.get("/v1/sessions/agent:logs:nope")
        assert missing.status_code == 404 and "x-request-id" in missing.headers
    gp.stop()
    lines = [line for line in gp.log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # raises on any line that is not JSON
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    access = [r for r in records if r["logger"] == "sessionwatch.http.access"]
    by_id = {r["requestId"]: r for r in access}
    assert by_id["proxy-id-42"]["method"] == "PUT" and by_id["proxy-id-42"]["status"] == 200
    assert all(r in by_id for r in made)
    assert by_id[missing.headers["x-request-id"]]["status"] == 404
    assert any(r["logger"].startswith("uvicorn") for r in records), "uvicorn's lines are missing or not JSON"
    assert any(r["logger"] == "sessionwatch.http" for r in records)


def test_a_record_emitted_during_a_request_carries_its_id() -> None:
    record = logging.LogRecord("sessionwatch.engine", logging.WARNING, __file__, 1, "store %s slow", ("x",), None)
    token = REQUEST_ID.set("req-7")
    try:
        out = json.loads(JsonFormatter().format(record))
    finally:
        REQUEST_ID.reset(token)
    assert out["requestId"] == "req-7" and out["message"] == "store x slow" and out["level"] == "warning"
    assert "requestId" not in json.loads(JsonFormatter().format(record))
