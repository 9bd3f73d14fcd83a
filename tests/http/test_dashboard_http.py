"""The dashboard's files and data routes over plain HTTP, and the browser guard's same-origin rule."""

from __future__ import annotations

import httpx

from tests.http.conftest import GatewayProcess

TOKEN = "dashboard-http-token-0123456789abcdef"
MAIN, PEER = "agent:main:main", "agent:main:peer"


def _gateway(gateway_factory, **kw: object) -> GatewayProcess:
    return gateway_factory(token=TOKEN, **kw).start()


def test_the_page_loads_without_a_token_but_data_needs_one(gateway_factory) -> None:
    gp = _gateway(gateway_factory)
    for path, kind in (
        ("/ui", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ):
        res = httpx.get(gp.url + path)
        assert res.status_code == 200 and res.headers["content-type"].startswith(kind), path
        csp = res.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert res.headers["x-content-type-options"] == "nosniff"
    page = httpx.get(gp.url + "/ui").text
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page  # nothing from outside
    assert httpx.get(gp.url + "/ui/secrets.txt").status_code == 401  # not a dashboard file: not open either
    for path in ("/v1/ui/overview", "/v1/ui/health", f"/v1/sessions/{MAIN}/inspect", "/v1/events/stream"):
        assert httpx.get(gp.url + path).status_code == 401, path
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(gp.url + "/ui/secrets.txt", headers=auth).status_code == 404


def test_the_session_page_reads_without_acknowledging(gateway_factory) -> None:
    gp = _gateway(gateway_factory)
    with httpx.Client(base_url=gp.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as http:
        for key in (MAIN, PEER):
            http.put(f"/v1/sessions/{key}", json={})
        http.post("/v1/watch", json={"watcher": PEER, "target": MAIN})
        seq = http.post(f"/v1/sessions/{MAIN}/inbound", json={"text": "hello", "channel": "cli"}).json()["event"][
            "sequence"
        ]
        before = http.get("/v1/cursors", params={"watcher": PEER}).json()["cursors"]
        view = http.get(f"/v1/sessions/{PEER}/inspect", params={"after": 0}).json()
        assert [q["contextKey"] for q in view["queue"]] and view["watching"][0]["stale"] is True
        assert MAIN in view["watching"][0]["notice"]
        target = http.get(f"/v1/sessions/{MAIN}/inspect", params={"after": seq - 1}).json()
        assert [e["sequence"] for e in target["changesSince"]["events"]] == [seq]
        assert target["changesSince"]["historyGap"] is False and target["watchers"][0]["watcher"] == PEER
        # nothing moved: the cursor and the queue are as before
        assert http.get("/v1/cursors", params={"watcher": PEER}).json()["cursors"] == before
        assert len(http.get(f"/v1/sessions/{PEER}/system-events").json()["entries"]) == 1
        overview = http.get("/v1/ui/overview").json()
        stale = [w for w in overview["watches"] if w["stale"]]
        assert [(w["watcher"], w["target"]) for w in stale] == [(PEER, MAIN)] and "changed" in stale[0]["notice"]
        assert {s["sessionKey"]: s["stateVersion"] for s in overview["sessions"]}[MAIN] == seq
        health = http.get("/v1/ui/health").json()
        assert health["store"]["backend"] == "sqlite" and health["sweep"]["ran"] is True
        assert health["prune"]["lastAt"] is not None


def test_the_guard_accepts_the_gateways_own_origin_and_still_refuses_others(gateway_factory) -> None:
    gp = _gateway(gateway_factory)
    host = f"127.0.0.1:{gp.port}"
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    body = b"{}"

    def post(**headers: str) -> int:
        return httpx.post(gp.url + f"/v1/sessions/{MAIN}/reset", content=body, headers={**auth, **headers}).status_code

    httpx.put(gp.url + f"/v1/sessions/{MAIN}", json={}, headers=auth)
    # the page at /ui, same origin: accepted (Chromium sends Origin on POST, and Sec-Fetch-Site)
    assert post(Origin=f"http://{host}", **{"Sec-Fetch-Site": "same-origin"}) == 200
    assert post(Origin=f"http://localhost:{gp.port}", Host=f"localhost:{gp.port}") == 200
    # any other origin is still refused: another site, another port on loopback, another scheme's port
    assert post(Origin="http://evil.example", **{"Sec-Fetch-Site": "cross-site"}) == 403
    assert post(Origin=f"http://127.0.0.1:{gp.port + 1}") == 403
    assert post(Origin=f"https://{host.split(':')[0]}") == 403
    assert post(Origin="null") == 403
    # an Origin naming us but a browser saying cross-site (a forged header can't come from a browser) is refused
    assert post(Origin=f"http://{host}", **{"Sec-Fetch-Site": "cross-site"}) == 403
    # DNS rebinding: the page's own name as Host and Origin is refused by the Host check
    assert post(Origin=f"http://evil.example:{gp.port}", Host=f"evil.example:{gp.port}") == 421


def test_with_the_host_check_off_a_matching_origin_is_not_same_origin(gateway_factory) -> None:
    gp = _gateway(gateway_factory, extra_args=["--allowed-host", "*"])
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    res = httpx.post(
        gp.url + f"/v1/sessions/{MAIN}/reset",
        content=b"{}",
        headers={**auth, "Host": f"evil.example:{gp.port}", "Origin": f"http://evil.example:{gp.port}"},
    )
    assert res.status_code == 403
