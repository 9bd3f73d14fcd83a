"""Following the gateway's log stream (``GET /v1/events/stream``) with reconnects, for the Python clients.

The stream's ids are log sequences; after a dropped connection the client reconnects with
``Last-Event-ID`` set to the last id it received, after the server's ``retry:`` delay, so nothing is
missed or repeated. What a follower yields: each log event (a dict with ``sequence``), and, when
retention removed events the follower had not seen, one gap dict ``{"historyGap": true,
"earliestAvailableSequence", "after", "prunedThrough"}`` before what is still stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx

from .errors import SessionwatchError, StoreUnavailable, error_from_json

PATH = "/v1/events/stream"
DEFAULT_RETRY_S = 2.0


class LogParser:
    """Server-sent events, one line at a time; ``feed`` returns a log event or a gap dict when complete."""

    def __init__(self) -> None:
        self.event = "message"
        self.data: list[str] = []
        self.id: int | None = None
        self.last_id: int | None = None
        self.retry_s = DEFAULT_RETRY_S

    def feed(self, line: str) -> dict[str, Any] | None:
        if line == "":
            out = None
            if self.id is not None:
                self.last_id = self.id
            if self.data and self.event in ("log", "gap"):
                out = json.loads("\n".join(self.data))
            self.event, self.data, self.id = "message", [], None
            return out
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "id" and value.isdigit():
            self.id = int(value)
        elif name == "retry" and value.isdigit():
            self.retry_s = int(value) / 1000
        return None


def params(session: str | None, agent: str | None, kinds: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if session is not None:
        out["session"] = session
    if agent is not None:
        out["agent"] = agent
    if kinds:
        out["kind"] = ",".join(kinds)
    return out


def _refused(res: httpx.Response) -> SessionwatchError:
    try:
        data = res.json()
    except ValueError:
        data = None
    return (
        error_from_json(data)
        if isinstance(data, dict) and "error" in data
        else StoreUnavailable(f"HTTP {res.status_code} from {PATH}")
    )


def _resume_headers(last: int | None) -> dict[str, str]:
    return {"Last-Event-ID": str(last)} if last is not None else {}


def follow(
    http: httpx.Client,
    base_url: str,
    after: int | None,
    query: dict[str, str],
    *,
    reconnect: bool,
    timeout: float | None,
) -> Iterator[dict[str, Any]]:
    last = after
    read = httpx.Timeout(10.0, read=timeout)
    while True:
        parser = LogParser()
        try:
            with http.stream("GET", PATH, params=query, headers=_resume_headers(last), timeout=read) as res:
                if res.status_code >= 400:
                    res.read()
                    if res.status_code != 503 or not reconnect:
                        raise _refused(res)
                else:
                    for line in res.iter_lines():
                        item = parser.feed(line)
                        if parser.last_id is not None:
                            last = parser.last_id
                        if item is not None:
                            yield item
        except httpx.ReadTimeout:
            raise TimeoutError(f"no data from the log stream within {timeout} s") from None
        except httpx.HTTPError as exc:
            if not reconnect:
                raise StoreUnavailable(f"log stream from {base_url} failed: {exc.__class__.__name__}: {exc}") from None
        if not reconnect:
            return
        time.sleep(parser.retry_s)


async def afollow(
    http: httpx.AsyncClient,
    base_url: str,
    after: int | None,
    query: dict[str, str],
    *,
    reconnect: bool,
    timeout: float | None,
) -> AsyncIterator[dict[str, Any]]:
    last = after
    read = httpx.Timeout(10.0, read=timeout)
    while True:
        parser = LogParser()
        try:
            async with http.stream("GET", PATH, params=query, headers=_resume_headers(last), timeout=read) as res:
                if res.status_code >= 400:
                    await res.aread()
                    if res.status_code != 503 or not reconnect:
                        raise _refused(res)
                else:
                    async for line in res.aiter_lines():
                        item = parser.feed(line)
                        if parser.last_id is not None:
                            last = parser.last_id
                        if item is not None:
                            yield item
        except httpx.ReadTimeout:
            raise TimeoutError(f"no data from the log stream within {timeout} s") from None
        except httpx.HTTPError as exc:
            if not reconnect:
                raise StoreUnavailable(f"log stream from {base_url} failed: {exc.__class__.__name__}: {exc}") from None
        if not reconnect:
            return
        await anyio.sleep(parser.retry_s)
