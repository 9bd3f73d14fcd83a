"""sessions_list pages over HTTP (the tool route and GatewayClient) and in the OpenAPI document."""

from __future__ import annotations

import httpx

from sessionwatch.client import GatewayClient

CALLER = "agent:pages:main"


def test_pages_over_the_tool_route_and_the_client(http: httpx.Client) -> None:
    keys = [f"agent:pages:s{i}" for i in range(5)]
    for key in keys:
        assert http.put(f"/v1/sessions/{key}", json={}).status_code == 200
    url = "/v1/tools/sessions_list"
    headers = {"X-Session-Key": CALLER}
    seen: list[str] = []
    body: dict = {"agentId": "pages", "limit": 2}
    while True:
        res = http.post(url, json=body, headers=headers)
        assert res.status_code == 200, res.text
        page = res.json()
        seen += [s["sessionKey"] for s in page["sessions"]]
        if "nextCursor" not in page:
            break
        body = {"agentId": "pages", "limit": 2, "cursor": page["nextCursor"]}
    assert sorted(seen) == keys and len(seen) == 5
    assert seen == [
        s["sessionKey"] for s in http.post(url, json={"agentId": "pages"}, headers=headers).json()["sessions"]
    ]

    bad = http.post(url, json={"cursor": "%%%"}, headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_argument"
    wrong_type = http.post(url, json={"cursor": 3}, headers=headers)
    assert wrong_type.status_code == 400 and wrong_type.json()["error"]["code"] == "invalid_argument"

    client = GatewayClient(str(http.base_url))
    try:
        first = client.call_tool("sessions_list", {"agentId": "pages", "limit": 4}, caller=CALLER)
        rest = client.call_tool(
            "sessions_list", {"agentId": "pages", "limit": 4, "cursor": first["nextCursor"]}, caller=CALLER
        )
        assert [s["sessionKey"] for s in first["sessions"] + rest["sessions"]] == seen
        assert "nextCursor" not in rest
        other = client.call_tool("sessions_list", {"limit": 4, "cursor": first["nextCursor"]}, caller=CALLER)
        assert other["error"]["code"] == "invalid_argument"
    finally:
        client.close()


def test_openapi_documents_cursor_and_next_cursor(http: httpx.Client) -> None:
    doc = http.get("/v1/openapi.json").json()
    op = doc["paths"]["/v1/tools/sessions_list"]["post"]
    text = str(op)
    assert "'cursor'" in text and "'nextCursor'" in text
