"""The dashboard at /ui in a real headless Chromium against a real ``sessionwatch serve`` process.

Uses the distribution's ``chromium`` (``.ci/run`` installs it) driven by Playwright with that executable;
no browser is downloaded. Each view is screenshotted (into docs/img/, which docs/dashboard.md embeds, only
with SESSIONWATCH_SCREENSHOTS=docs/img).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.commands import SESSIONWATCH
from tests.support.ports import listening_socket, port_of, spawn_serving, url_of
from tests.support.waiting import wait_http

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on this machine (CI installs the distribution's chromium package; see .ci/run)",
)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

# The screenshots docs/dashboard.md embeds are taken here; they land in docs/img/ only when asked for
# (SESSIONWATCH_SCREENSHOTS=docs/img .venv/bin/pytest tests/http -k dashboard): a test run never
# rewrites a tracked file.
IMG = Path(os.environ.get("SESSIONWATCH_SCREENSHOTS") or tempfile.mkdtemp(prefix="sessionwatch-screenshots-"))
TOKEN = "dashboard-test-token-0123456789abcdef"
MAIN, KID, PEER, HELPER = "agent:main:main", "agent:main:subagent:kid", "agent:main:peer", "agent:ops:helper"


class Serve:
    def __init__(self, tmp: Path, token: str | None) -> None:
        sock = listening_socket()  # served with --fd: no port race
        self.port, self.url = port_of(sock), url_of(sock)
        self.token = token
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONWATCH_")}
        # A relative store path (run in tmp): the screenshots in the docs show no path of this machine.
        args = [*SESSIONWATCH, "serve", "--store", "sqlite:///state.db"]
        if token:
            args += ["--token", token]
        self.log = open(tmp / "serve.log", "wb")
        self.proc = spawn_serving(args, sock, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        wait_http(self.url + "/v1/health", self.proc, timeout=30, log=tmp / "serve.log")

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path, TOKEN)
    yield s
    s.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _seed(s: Serve) -> None:
    with s.http() as http:
        for key in (MAIN, PEER, HELPER):
            assert http.put(f"/v1/sessions/{key}", json={"label": key.rsplit(":", 1)[1]}).status_code == 200
        spawned = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": MAIN})
        assert spawned.status_code == 200, spawned.text
        assert http.post("/v1/watch", json={"watcher": PEER, "target": MAIN}).status_code == 200
        assert http.post("/v1/watch", json={"watcher": MAIN, "target": PEER}).status_code == 200
        assert (
            http.post(f"/v1/sessions/{PEER}/goal", json={"action": "create", "objective": "review"}).status_code == 200
        )
        http.post(f"/v1/sessions/{MAIN}/system-events/drain", json={})  # MAIN is up to date with PEER


def test_the_dashboard_shows_a_new_stale_pair_and_log_row_live(serve: Serve, browser: Any) -> None:
    _seed(serve)
    IMG.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(serve.url + "/ui")
    # The page loads without a token, but shows no data until one is entered.
    page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
    assert page.locator("#sessions-tree li").count() == 0
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector(f'#sessions-tree li[data-session="{KID}"]', timeout=10_000)
    assert page.evaluate("sessionStorage.getItem('sessionwatch.token')") == TOKEN
    assert page.evaluate("localStorage.length") == 0
    # the tree: the kid sits under its spawn parent, groups per agent
    assert page.locator(f'li[data-session="{MAIN}"] li[data-session="{KID}"]').count() == 1
    assert page.locator(".agent-group").count() == 2
    page.wait_for_selector("#status.live", timeout=10_000)
    assert page.locator(f'.stale-pair[data-watcher="{PEER}"][data-target="{MAIN}"]').count() == 0

    # A person's message through the API: PEER (which watches MAIN) becomes stale, and a row is logged.
    with serve.http() as http:
        res = http.post(f"/v1/sessions/{MAIN}/inbound", json={"text": "please rebase first", "channel": "telegram"})
        assert res.status_code == 200 and res.json()["recorded"], res.text
        seq = res.json()["event"]["sequence"]
    started = time.monotonic()
    page.click('nav a[data-view="log"]')
    page.wait_for_selector(f'#log-table tr.log-row[data-seq="{seq}"]', timeout=2_000)
    page.click('nav a[data-view="graph"]')
    stale = page.wait_for_selector(f'.stale-pair[data-watcher="{PEER}"][data-target="{MAIN}"]', timeout=2_000)
    assert time.monotonic() - started < 2.5  # both arrived without a reload (the 2 s budget, plus the clicks)
    assert "changed" in stale.inner_text() or "human" in stale.inner_text().lower() or MAIN in stale.inner_text()
    assert page.locator(f'line.edge.stale[data-watcher="{PEER}"][data-target="{MAIN}"]').count() == 1
    page.screenshot(path=str(IMG / "dashboard-graph.png"), full_page=True)

    page.click('nav a[data-view="log"]')
    page.select_option("#filter-kind", "human_direct_message")
    assert page.locator("#log-table tr.log-row").count() == 1
    page.select_option("#filter-kind", "")
    page.screenshot(path=str(IMG / "dashboard-log.png"), full_page=True)

    page.click('nav a[data-view="sessions"]')
    page.screenshot(path=str(IMG / "dashboard-sessions.png"), full_page=True)

    # The session page of the watcher: changesSince N, its cursors, its queue (peeked, not drained).
    page.goto(serve.url + "/ui#session/" + PEER.replace(":", "%3A"))
    page.wait_for_selector("#changes-json", timeout=5_000)
    assert "please rebase first" not in page.content()  # a log/status view never carries message text
    queue_text = page.locator("#session-body").inner_text()
    assert MAIN in queue_text
    page.screenshot(path=str(IMG / "dashboard-session.png"), full_page=True)
    with serve.http() as http:  # looking changed nothing: the notice is still queued, the pair still stale
        entries = http.get(f"/v1/sessions/{PEER}/system-events").json()["entries"]
        assert any(MAIN in e["text"] for e in entries)
        pair = [c for c in http.get("/v1/cursors", params={"watcher": PEER}).json()["cursors"] if c["target"] == MAIN]
        assert pair[0]["material"] > pair[0]["lastSeen"]

    page.click('nav a[data-view="health"]')
    page.wait_for_selector("#health-ready", timeout=5_000)
    assert "sqlite:///state.db" in page.locator("#health-body").inner_text()
    page.screenshot(path=str(IMG / "dashboard-health.png"), full_page=True)
    assert errors == []


def test_without_a_token_the_page_loads_but_no_data_does(serve: Serve, browser: Any) -> None:
    _seed(serve)
    page = browser.new_page()
    page.goto(serve.url + "/ui")
    page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
    time.sleep(0.5)  # a window in which data would (wrongly) arrive: the test is that none does
    assert page.locator("#sessions-tree li").count() == 0
    assert PEER not in page.content() and page.locator("#log-table tr.log-row").count() == 0
    # a wrong token is refused the same way
    page.fill("#token-input", "wrong-token-0123456789")
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
    assert page.locator("#sessions-tree li").count() == 0
