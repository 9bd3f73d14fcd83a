"""``GET /v1/events/stream``: the signal log as Server-Sent Events, resumable.

Each event goes out as ``id: <sequence>`` / ``event: log`` / ``data: <the event's JSON>`` (the shape of
``GET /v1/events``), after a ``retry:`` hint. A client that reconnects with ``Last-Event-ID: N`` (or
``?after=N``, for clients without EventSource) gets every event after N exactly once: sequences are
allocated in commit order on both backends, so reading ``sequence > N`` never skips one that commits
late. When retention already removed events after N, an ``event: gap`` comes first with the facts
``changesSince`` reports (``historyGap``, ``earliestAvailableSequence``), then what is still stored.

One poller per gateway (:class:`LogFeed`) reads new events once and keeps the newest in memory; every
connected client is served from that ring, so a hundred open dashboards cost one store read per poll,
not a hundred. A client behind the ring (resuming from far back, or too slow) reads pages from the
store itself until it catches up. Filters (``session``, ``agent``, ``kind``) and a scoped token's agents
narrow what a client gets; the ids stay the log's sequences.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import weakref
from typing import Any

import anyio.to_thread
from starlette.types import Receive, Scope, Send

from ..access import Principal
from ..engine import Gateway
from ..errors import Forbidden, InvalidArgument
from ..keys import agent_of, parse_key
from ..kinds import ALL_KINDS
from ..repeats import RepeatedFailures
from ..validation import MAX_SEQUENCE
from . import schemas
from .auth import OWN_VIEW
from .endpoints import Call, Endpoint
from .jsonio import dumps
from .runtime import CLOSE, Runtime

log = logging.getLogger("sessionwatch.http.log_stream")
failure_log = RepeatedFailures(log)  # a failure repeated per request is logged once, then counted

RETRY_MS = 2000  # the reconnect delay a client is told to use
POLL_S = 0.2  # how often the shared poller looks for new events (it also sees other processes' writes)
PAGE = 1000  # events per store read
RING = 5000  # newest events kept in memory for connected clients
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
NEW = object()  # put into a subscriber's queue: the feed has new events


class LogFeed:
    """The gateway's one reader of new events; the ring holds every event with sequence in (base, head]."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.base = 0
        self.head = 0
        self.seqs: list[int] = []
        self.events: list[dict[str, Any]] = []
        self.frames: list[bytes] = []  # each event's SSE frame, encoded once for every client
        self.subscribers: set[asyncio.Queue[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None

    async def ensure_running(self, gw: Gateway) -> None:
        if self._task is not None and not self._task.done():
            return
        if self._starting is not None:  # another connection is starting it: wait for that
            await asyncio.shield(self._starting)
            return
        self._starting = asyncio.get_running_loop().create_future()
        try:
            bounds = await anyio.to_thread.run_sync(gw.log_bounds, limiter=self.runtime.store_limiter)
            self.base = self.head = bounds.last
            self.seqs, self.events, self.frames = [], [], []
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._starting.set_result(None)
        except BaseException as exc:
            self._starting.set_exception(exc)
            self._starting.exception()  # retrieved: a starter that failed raised it already
            raise
        finally:
            self._starting = None

    def after(self, seq: int, flt: Filter) -> bytes:
        """The frames of the ring's events with sequence > ``seq`` that ``flt`` wants (caller checks
        ``seq >= base``)."""
        i = bisect.bisect_right(self.seqs, seq)
        if flt.everything:
            return b"".join(self.frames[i:])
        return b"".join(f for e, f in zip(self.events[i:], self.frames[i:], strict=True) if flt.wants(e))

    async def _run(self) -> None:
        while self.subscribers:
            gw = self.runtime.gateway
            batch: list[dict[str, Any]] = []
            if gw is not None and self.runtime.state == "ok":
                try:
                    batch = await anyio.to_thread.run_sync(
                        gw.events_after, self.head, PAGE, limiter=self.runtime.store_limiter
                    )
                except Exception as exc:  # noqa: BLE001 - a failed read is retried; clients keep their place
                    failure_log.warning("reading new events for the log stream failed: %s", exc)
                    await asyncio.sleep(1.0)
                    continue
            if batch:
                self.seqs.extend(int(e["sequence"]) for e in batch)
                self.events.extend(batch)
                self.frames.extend(format_event(e) for e in batch)
                self.head = self.seqs[-1]
                if len(self.seqs) > RING:
                    cut = len(self.seqs) - RING
                    self.base = self.seqs[cut - 1]
                    del self.seqs[:cut], self.events[:cut], self.frames[:cut]
                for queue in list(self.subscribers):
                    if queue.empty():
                        queue.put_nowait(NEW)
            if len(batch) < PAGE:
                await asyncio.sleep(POLL_S)


_FEEDS: weakref.WeakKeyDictionary[Runtime, LogFeed] = weakref.WeakKeyDictionary()


def feed_of(runtime: Runtime) -> LogFeed:
    feed = _FEEDS.get(runtime)
    if feed is None:
        feed = _FEEDS[runtime] = LogFeed(runtime)
    return feed


class Filter:
    """What one client sees: its token's agents, narrowed by the session/agent/kind it asked for."""

    def __init__(self, principal: Principal, session: str | None, agent: str | None, kinds: frozenset[str] | None):
        scope = principal.agent_filter()
        if agent is not None and not principal.covers(agent):
            raise Forbidden(f"this token may not read the log of agent {agent!r}")
        if session is not None:
            owner = agent_of(session) or agent
            if owner is None and scope is not None:
                raise InvalidArgument("a 'global' session filter needs agent= with a scoped token")
            if owner is not None:
                principal.require_key(session, owner, "log of session")
            agent = owner
        self.session = session
        self.agents: frozenset[str] | None = frozenset({agent}) if agent is not None else scope
        self.kinds = kinds
        self.everything = self.agents is None and session is None and kinds is None

    def bounds_scope(self) -> dict[str, Any]:
        if self.session is not None and self.agents is not None and len(self.agents) == 1:
            return {"session": (self.session, next(iter(self.agents)))}
        return {"agents": self.agents}

    def wants(self, e: dict[str, Any]) -> bool:
        return (
            (self.agents is None or e["agentId"] in self.agents)
            and (self.session is None or e["sessionKey"] == self.session)
            and (self.kinds is None or e["kind"] in self.kinds)
        )


def format_event(e: dict[str, Any]) -> bytes:
    return b"id: %d\nevent: log\ndata: " % int(e["sequence"]) + dumps(e) + b"\n\n"


def _last_id(chunk: bytes) -> int:
    """The id of the last event in a chunk of ``format_event`` frames (0 when it holds none)."""
    # each frame starts the chunk or follows the blank line that ends the one before; a frame's JSON
    # never holds a raw newline (it is escaped), so this finds a frame's own id line
    at = chunk.rfind(b"\n\nid: ")
    start = at + 2 if at >= 0 else (0 if chunk.startswith(b"id: ") else -1)
    if start < 0:
        return 0
    return int(chunk[start + 4 : chunk.find(b"\n", start)])


def format_gap(after: int, earliest: int, pruned: int) -> bytes:
    return (
        b"event: gap\ndata: "
        + dumps({"historyGap": True, "earliestAvailableSequence": earliest, "after": after, "prunedThrough": pruned})
        + b"\n\n"
    )


class LogStream:
    """One client's stream: catch up from the store while behind the feed's ring, then follow the ring."""

    def __init__(
        self, gw: Gateway, runtime: Runtime, feed: LogFeed, flt: Filter, after: int, *, resumed: bool = False
    ) -> None:
        self.gw, self.runtime, self.feed, self.flt = gw, runtime, feed, flt
        self.scanned = after  # every event <= scanned was sent or filtered out
        # A fresh stream names where it starts (a data-less id: a reconnect resumes there); a resumed one
        # sends no id it was given, so the first id a client reads is the first event after it.
        self.resumed = resumed
        self.told = after  # the highest id this client holds: it gave it, or the stream sent it
        self.reported_gap = 0
        self.queue: asyncio.Queue[Any] = asyncio.Queue(1)
        feed.subscribers.add(self.queue)
        runtime.streams[self.queue] = flt.agents

    async def _read(self, fn: Any, *args: Any, **kw: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kw), limiter=self.runtime.store_limiter)

    async def _catch_up(self) -> bytes:
        """One store page after ``scanned`` (with a gap event first when retention removed some)."""
        out = b""
        bounds = await self._read(self.gw.log_bounds, **self.flt.bounds_scope())
        if bounds.gap(self.scanned) and bounds.pruned > self.reported_gap:
            self.reported_gap = bounds.pruned
            out += format_gap(self.scanned, bounds.earliest, bounds.pruned)
        batch = await self._read(self.gw.events_after, self.scanned, PAGE, agents=self.flt.agents)
        out += b"".join(format_event(e) for e in batch if self.flt.wants(e))
        if batch:
            self.scanned = int(batch[-1]["sequence"])
        if len(batch) < PAGE:  # the store has nothing more: everything newer is in (or will reach) the ring
            self.scanned = max(self.scanned, self.feed.base)
        return out

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if self.queue.full():
                    self.queue.get_nowait()
                self.queue.put_nowait(CLOSE)
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.get_running_loop().create_task(self._watch_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            await send(
                {
                    "type": "http.response.body",
                    "more_body": True,
                    "body": b"retry: %d\n: following the log after %d\n\n" % (RETRY_MS, self.scanned)
                    if self.resumed
                    else b"retry: %d\nid: %d\n: following the log after it\n\n" % (RETRY_MS, self.scanned),
                }
            )
            while not watcher.done():
                if self.scanned < self.feed.base:
                    chunk = await self._catch_up()
                else:
                    chunk, head = self.feed.after(self.scanned, self.flt), self.feed.head
                    self.scanned = max(self.scanned, head)
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    self.told = max(self.told, _last_id(chunk))
                    continue
                if self.scanned < self.feed.base:
                    continue
                try:
                    item = await asyncio.wait_for(self.queue.get(), self.runtime.keepalive_s)
                except TimeoutError:
                    # The id (no data: nothing is dispatched) moves a filtered client's resume point past
                    # what it was not sent, so a reconnect does not rescan it.
                    moved = self.scanned > self.told  # never an id the client holds already
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b": keep-alive\nid: %d\n\n" % self.scanned if moved else b": keep-alive\n\n",
                            "more_body": True,
                        }
                    )
                    self.told = max(self.told, self.scanned)
                    continue
                if item is CLOSE:
                    break
            if not watcher.done():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-write
            pass
        except Exception:  # noqa: BLE001 - the response has started: end the stream, the client resumes
            failure_log.exception("the log stream failed; the client will resume from its last id")
        finally:
            self.feed.subscribers.discard(self.queue)
            self.runtime.streams.pop(self.queue, None)
            watcher.cancel()


def _start(c: Call) -> int | None:
    """Where to resume: ``Last-Event-ID`` (what EventSource sends on reconnect) wins over ``after``."""
    header = c.request.headers.get("last-event-id", "").strip()
    if header:
        if not header.isdigit() or int(header) > MAX_SEQUENCE:
            raise InvalidArgument(f"Last-Event-ID must be a log sequence (a non-negative integer), got {header[:40]!r}")
        return int(header)
    after = c.query.get("after")
    return int(after) if after is not None else None


def _kinds(raw: str | None) -> frozenset[str] | None:
    if raw is None:
        return None
    kinds = frozenset(k.strip() for k in raw.split(",") if k.strip())
    unknown = sorted(kinds - ALL_KINDS)
    if unknown or not kinds:
        raise InvalidArgument(
            f"kind must be one or more of {', '.join(sorted(ALL_KINDS))} (comma-separated); got {raw[:80]!r}"
        )
    return kinds


async def _open(c: Call) -> LogStream:
    session = c.query.get("session")
    if session is not None:
        session = parse_key(session, "session").raw
    flt = Filter(c.principal, session, c.query.get("agent"), _kinds(c.query.get("kind")))
    start = _start(c)
    feed = feed_of(c.runtime)
    await feed.ensure_running(c.gw)
    return LogStream(c.gw, c.runtime, feed, flt, feed.head if start is None else start, resumed=start is not None)


ROUTES: list[Endpoint] = [
    Endpoint(
        "GET",
        "/v1/events/stream",
        "stream_log",
        "Server-Sent Events: the signal log as it is recorded, resumable with Last-Event-ID.",
        _open,
        tag="log",
        query={
            "after": {"type": "integer", "minimum": 0, "maximum": MAX_SEQUENCE},
            "session": schemas.KEY,
            "agent": schemas.AGENT_ID,
            "kind": {"type": "string", "minLength": 1, "maxLength": 400},
        },
        touches=OWN_VIEW,
        description="Each event is `id: <sequence>`, `event: log`, `data: <event JSON>` (as GET /v1/events). "
        "Resume with the `Last-Event-ID` header (or `after=N`): every event after N, once. When "
        "retention removed some of them an `event: gap` with `{historyGap, "
        "earliestAvailableSequence, after, prunedThrough}` comes first. Without either the stream "
        "starts at the log's head. A scoped token sees only its agents' events; `session`, "
        "`agent` and `kind` (comma-separated) narrow it further.",
    ),
]
