"""``AsyncGatewayClient`` against a real gateway process: the same answers as the in-process Gateway."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from sessionwatch import Gateway
from sessionwatch.client import AsyncGatewayClient
from tests.support.waiting import await_until

from .test_flow import _normalize, _script
from .test_sse import _human, _manager_with_child


async def _streaming(client: AsyncGatewayClient) -> bool:
    return bool((await client.health())["streams"] >= 1)


class _Blocking:
    """Runs each coroutine method of an AsyncGatewayClient on one event loop, so the sync script can drive it."""

    def __init__(self, portal: BlockingPortal, client: AsyncGatewayClient) -> None:
        self._portal, self._client = portal, client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        return lambda *a, **kw: self._portal.call(functools.partial(method, *a, **kw))


def test_async_client_matches_in_process_gateway(gateway_factory, tmp_path: Path) -> None:
    local = Gateway.open(f"sqlite:///{tmp_path}/local.db")
    try:
        expected = _normalize(_script(local))
    finally:
        local.close()
    gp = gateway_factory(f"sqlite:///{tmp_path}/remote.db").start()
    with start_blocking_portal() as portal:
        client = portal.call(AsyncGatewayClient, gp.url)
        try:
            got = _normalize(_script(_Blocking(portal, client)))
            assert portal.call(client.health)["status"] == "ok"
        finally:
            portal.call(client.close)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"call #{i} differs"


@pytest.mark.anyio
async def test_async_client_streams_wakes_and_reports_errors(shared_gateway, http: httpx.Client) -> None:
    manager, child = _manager_with_child(http, "asyncsse")
    async with AsyncGatewayClient(shared_gateway.url) as client:
        got: list[dict[str, Any]] = []

        async def consume() -> None:
            async for wake in client.stream_wakes(manager, timeout=10):
                got.append(wake)
                return  # leaving the loop closes the stream

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await await_until(lambda: _streaming(client), what="the wake stream subscribed")
            await anyio.to_thread.run_sync(_human, http, child)
        assert got and got[0]["watcher"] == manager and got[0]["target"] == child

        with pytest.raises(Exception) as err:
            await client.stream_wakes("global").__anext__()
        assert getattr(err.value, "code", None) == "invalid_argument"
        bad = await client.call_tool("session_status", {"sessionKey": "agent:main:nobody"}, caller=manager)
        assert bad["error"]["code"] == "not_found"

    unreachable = AsyncGatewayClient("http://127.0.0.1:9", timeout=2)
    try:
        assert (await unreachable.call_tool("sessions_list", {}, caller=manager))["error"]["code"] == "unavailable"
        with pytest.raises(Exception) as err:
            await unreachable.get_session(manager)
        assert getattr(err.value, "code", None) == "unavailable"
    finally:
        await unreachable.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
