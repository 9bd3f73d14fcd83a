"""The dashboard's lifecycle states in a real headless Chromium against a real ``sessionwatch serve``: a
badge per session that follows reports live, waiting sessions first, the lifecycle filter, the session
page's state. Same harness as test_dashboard_browser.py (the distribution's chromium via Playwright)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from . import test_dashboard_browser as harness
from .test_dashboard_browser import IMG, TOKEN, Serve

pytestmark = harness.pytestmark


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path, TOKEN)
    yield s
    s.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with harness.sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=harness.CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


MAIN, KID, PEER, QUIET = "agent:main:main", "agent:main:subagent:kid", "agent:main:peer", "agent:main:quiet"


def _report(http: httpx.Client, key: str, state: str, **extra: Any) -> None:
    res = http.post(f"/v1/sessions/{key}/lifecycle", json={"state": state, **extra})
    assert res.status_code == 200, res.text


def _roots(page: Any) -> list[str]:
    """The agent group's top-level sessions, in the order shown."""
    return page.eval_on_selector_all(
        '.agent-group[data-agent="main"] > ul.tree.root > li', "lis => lis.map(li => li.dataset.session)"
    )


def test_badges_waiting_first_and_the_filter(serve: Serve, browser: Any) -> None:
    with serve.http() as http:
        for key in (MAIN, PEER, QUIET):  # created in this order: newest (QUIET) would be listed first
            assert http.put(f"/v1/sessions/{key}", json={}).status_code == 200
        spawned = http.post("/v1/tools/sessions_spawn", json={"label": "kid"}, headers={"X-Session-Key": MAIN})
        assert spawned.status_code == 200, spawned.text
        _report(http, PEER, "working")
        _report(http, KID, "ended", outcome="failed")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(serve.url + "/ui")
    page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector(f'li[data-session="{PEER}"] .badge.state-working', timeout=10_000)
    assert page.locator(f'li[data-session="{KID}"] .badge.state-ended').inner_text().startswith("ended (failed)")
    assert page.locator(f'li[data-session="{QUIET}"] .badge.state').count() == 0  # never reported: no badge
    assert _roots(page) == [PEER, QUIET, MAIN]  # working before those without a state; then newest first
    page.wait_for_selector("#status.live", timeout=10_000)

    # MAIN starts waiting on a person: its badge appears live and it moves to the top.
    with serve.http() as http:
        _report(http, MAIN, "waiting")
    page.wait_for_selector(f'li[data-session="{MAIN}"] > .node .badge.state-waiting', timeout=10_000)
    assert _roots(page) == [MAIN, PEER, QUIET]
    assert "1 waiting" in page.locator("#sessions-count").inner_text()
    page.screenshot(path=str(IMG / "dashboard-lifecycle.png"), full_page=True)

    # The filter: only waiting sessions; then those that never reported; then any.
    page.select_option("#filter-lifecycle", "waiting")
    assert page.eval_on_selector_all("#sessions-tree li", "lis => lis.map(li => li.dataset.session)") == [MAIN]
    page.select_option("#filter-lifecycle", "none")
    assert page.eval_on_selector_all("#sessions-tree li", "lis => lis.map(li => li.dataset.session)") == [QUIET]
    page.select_option("#filter-lifecycle", "ended")  # a child whose parent is filtered out stands alone
    assert page.eval_on_selector_all("#sessions-tree li", "lis => lis.map(li => li.dataset.session)") == [KID]
    page.select_option("#filter-lifecycle", "")
    assert page.locator("#sessions-tree li").count() == 4

    # The session page shows the state too.
    page.goto(serve.url + "/ui#session/" + KID.replace(":", "%3A"))
    page.wait_for_selector("#session-lifecycle .badge.state-ended", timeout=5_000)
    assert errors == []
