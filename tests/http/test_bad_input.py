"""Every route fed malformed JSON, wrong types, unknown sessions and oversized bodies: a 4xx JSON error,
never a 500, and the store is unchanged."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

MANAGER = "agent:bad:main"
CHILD = "agent:bad:subagent:kid"
UNKNOWN = "agent:bad:nobody"
UPSTREAM_PREFIXES = ("/v1/catalogs", "/v1/upstream", "/v1/nodes")


@pytest.fixture(scope="module")
def seeded(shared_gateway) -> dict[str, Any]:
    with httpx.Client(base_url=shared_gateway.url, timeout=10) as http:
        http.put(f"/v1/sessions/{MANAGER}", json={})
        http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": MANAGER})
        http.post(f"/v1/sessions/{CHILD}/inbound", json={"text": "hi", "channel": "web"})
        return http.get("/v1/openapi.json").json()


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield method.upper(), path, op


def _fill(path: str, key: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: key if m.group(1) == "key" else "x", path)


def _headers(path: str) -> dict[str, str]:
    return {"X-Session-Key": MANAGER} if path.startswith("/v1/tools/") else {}


def snapshot(http: httpx.Client) -> Any:
    """Everything a bad request could have touched."""
    return (
        http.get("/v1/events", params={"after": 0, "limit": 1000}).json(),
        http.get("/v1/cursors").json(),
        [http.get(f"/v1/sessions/{k}/system-events").json() for k in (MANAGER, CHILD)],
        [http.get(f"/v1/sessions/{k}").json() for k in (MANAGER, CHILD)],
        http.post("/v1/tools/sessions_list", json={"limit": 1000}, headers={"X-Session-Key": MANAGER}).json(),
        http.post("/v1/tools/sessions_history", json={"sessionKey": CHILD}, headers={"X-Session-Key": MANAGER}).json(),
    )


def assert_client_error(res: httpx.Response, *codes: str) -> None:
    assert 400 <= res.status_code < 500, f"{res.request.method} {res.request.url}: {res.status_code} {res.text}"
    assert res.headers["content-type"].startswith("application/json")
    err = res.json()["error"]
    assert isinstance(err["message"], str) and err["message"]
    if codes:
        assert err["code"] in codes, res.text


def _wrong(schema: dict[str, Any]) -> Any:
    kinds = schema.get("type", "string")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if "string" in kinds:
        return 12345
    if "integer" in kinds or "number" in kinds:
        return "12"
    if "boolean" in kinds:
        return "true"
    if "array" in kinds:
        return "1,2"
    return [1, 2]


MALFORMED: list[bytes] = [
    b'{"text": ',
    b"[1, 2]",
    b'"just a string"',
    b"42",
    b"null",
    b'{"a": NaN}',
    b"\xff\xfe{}",
    b"{'single': 'quotes'}",
    b"[" * 5000 + b"]" * 5000,
]


def test_malformed_bodies_are_400(http: httpx.Client, seeded: dict[str, Any]) -> None:
    before = snapshot(http)
    checked = 0
    for method, path, op in _operations(seeded):
        if "requestBody" not in op:
            continue
        for raw in MALFORMED:
            res = http.request(
                method, _fill(path, CHILD), content=raw, headers={"Content-Type": "application/json", **_headers(path)}
            )
            assert_client_error(res, "invalid_argument")
            checked += 1
    assert checked > 200
    assert snapshot(http) == before


def test_wrong_types_and_unknown_fields_are_400(http: httpx.Client, seeded: dict[str, Any]) -> None:
    before = snapshot(http)
    for method, path, op in _operations(seeded):
        if "requestBody" not in op:
            continue
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        for name, prop in schema.get("properties", {}).items():
            res = http.request(method, _fill(path, CHILD), json={name: _wrong(prop)}, headers=_headers(path))
            assert_client_error(res, "invalid_argument")
        res = http.request(method, _fill(path, CHILD), json={"surprise": 1}, headers=_headers(path))
        assert_client_error(res, "invalid_argument")
    for path, params in (
        ("/v1/events", {"after": "x"}),
        ("/v1/events", {"after": "-1"}),
        ("/v1/events", {"limit": "0"}),
        ("/v1/events", {"limit": "1.5"}),
        ("/v1/cursors", {"watcher": "not a key"}),
        ("/v1/cursors", {"target": "agent::x"}),
    ):
        assert_client_error(http.get(path, params=params), "invalid_argument")
    assert snapshot(http) == before


def test_unknown_sessions_and_bad_keys(http: httpx.Client, seeded: dict[str, Any]) -> None:
    before = snapshot(http)
    for method, path, _op in _operations(seeded):
        if "{key}" not in path:
            continue
        body = _minimal_body(path)
        for key, codes in (
            (UNKNOWN, ("not_found",)),
            ("agent%3A%3Abad", ("invalid_argument",)),
            ("not%20a%20key", ("invalid_argument",)),
            ("x" * 600, ("invalid_argument",)),
        ):
            defined_for_unknown = (
                method in ("PUT", "DELETE") or path.endswith(("/state-version", "/link")) or "system-events" in path
            )
            if key == UNKNOWN and defined_for_unknown:
                continue  # creates, or answers for unknown sessions (0, empty queue, deleted: false, no link)
            res = http.request(method, _fill(path, key), json=body)
            assert_client_error(res, *codes)
    # Tools: unknown target sessions, unknown callers, unknown tools.
    for name, args in (
        ("session_status", {"sessionKey": UNKNOWN}),
        ("sessions_history", {"sessionKey": UNKNOWN}),
        ("sessions_send", {"sessionKey": UNKNOWN, "message": "x"}),
    ):
        assert_client_error(http.post(f"/v1/tools/{name}", json=args, headers={"X-Session-Key": MANAGER}), "not_found")
    assert_client_error(
        http.post("/v1/tools/sessions_spawn", json={"label": "z"}, headers={"X-Session-Key": UNKNOWN}), "not_found"
    )
    assert_client_error(http.post("/v1/tools/rm_rf", json={}, headers={"X-Session-Key": MANAGER}), "unknown_tool")
    assert_client_error(
        http.post("/v1/tools/session_status", json={"changesSince": 1.0}, headers={"X-Session-Key": MANAGER}),
        "invalid_argument",
    )
    assert_client_error(
        http.post("/v1/tools/session_status", json={"changesSince": True}, headers={"X-Session-Key": MANAGER}),
        "invalid_argument",
    )
    assert_client_error(http.get("/v1/nope"), "not_found")
    assert_client_error(http.patch(f"/v1/sessions/{MANAGER}/inbound"), "method_not_allowed")
    assert snapshot(http) == before


def _minimal_body(path: str) -> dict[str, Any]:
    if "/hooks/" in path:
        return {"hook_event_name": "UserPromptSubmit"}
    if path.endswith("/inbound"):
        return {"text": "t", "channel": "web"}
    if path.endswith("/goal"):
        return {"action": "create", "objective": "o"}
    if path.endswith("/system-events/ack"):
        return {"ids": [1]}
    if path.endswith("/runs"):
        return {"runId": "r"}
    if path.endswith("/end"):
        return {"status": "ok"}
    if path.endswith("/compactions"):
        return {"operationId": "op"}
    if path.endswith("/messages"):
        return {"role": "user", "text": "t"}
    if path.endswith("/system-events"):
        return {"text": "t"}
    if path.endswith("/lifecycle"):
        return {"state": "idle"}
    if path.endswith("/lifecycle/gone"):
        return {"pid": 1}
    return {}


def test_oversized_bodies_are_413(gateway_factory) -> None:
    gp = gateway_factory(extra_args=["--max-body-bytes", "2048"]).start()
    with httpx.Client(base_url=gp.url, timeout=10) as http:
        http.put(f"/v1/sessions/{MANAGER}", json={})
        before = snapshot(http)
        doc = http.get("/v1/openapi.json").json()
        big = {"text": "x" * 4096, "channel": "web"}
        for method, path, op in _operations(doc):
            url = _fill(path, MANAGER)
            res = http.request(method, url, json=big, headers=_headers(path))
            assert res.status_code == 413 and res.json()["error"]["code"] == "payload_too_large", (path, res.text)

            # No Content-Length (chunked): the cap is enforced on the streamed size too.
            def chunks() -> Iterator[bytes]:
                yield b'{"text": "'
                for _ in range(8):
                    yield b"y" * 512
                yield b'", "channel": "web"}'

            if "requestBody" in op:  # a body must say it is JSON (docs/security.md)
                res = http.request(
                    method, url, content=chunks(), headers={**_headers(path), "Content-Type": "application/json"}
                )
                assert res.status_code == 413 and res.json()["error"]["code"] == "payload_too_large", (path, res.text)
        assert snapshot(http) == before


def test_default_limits(http: httpx.Client, seeded: dict[str, Any]) -> None:
    before = snapshot(http)
    # Over the 4 MiB body cap.
    res = http.post(
        f"/v1/sessions/{CHILD}/inbound",
        content=b"{" + b" " * (4 * 1024 * 1024) + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert res.status_code == 413
    # Within the body cap but over the 1 MiB text limit of the engine: bad input (docs/http.md, "Limits and errors").
    res = http.post(f"/v1/sessions/{CHILD}/inbound", json={"text": "x" * (1024 * 1024 + 1), "channel": "web"})
    assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument"
    res = http.post(
        "/v1/tools/sessions_send",
        json={"sessionKey": CHILD, "message": "x" * (1024 * 1024 + 1)},
        headers={"X-Session-Key": MANAGER},
    )
    assert res.status_code == 400 and res.json()["error"]["code"] == "invalid_argument"
    assert snapshot(http) == before
