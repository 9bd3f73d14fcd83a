"""PostgreSQL: wakes across processes (LISTEN/NOTIFY, with a poll as the fallback) and the
cross-process lock for single-runner work; part of the store's lifecycle."""

from __future__ import annotations

import json
import logging
import select
import threading
import time
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from ...keys import is_subagent_key
from ..base import WakeListener
from ..records import (
    WakeRequest,
)
from .connection import PostgresConnection, _AdvisoryLock, lock_key

log = logging.getLogger("sessionwatch.store.postgres")

_POLL = (
    "SELECT c.watcher, c.target, c.wake_seq FROM cursors c JOIN queue_heads h ON h.session_key = c.watcher"
    " WHERE c.watcher = ANY (%(ws)s::text[]) AND c.wake_seq > %(last)s::bigint AND c.provenance = 'explicit'"
    " AND NOT c.queued_quiet AND c.queued_idx > h.drained AND h.appended - c.queued_idx < %(cap)s::integer"
)


class PostgresWakes(PostgresConnection):
    def listen_wakes(self, listener: WakeListener) -> None:
        self._listener = listener
        if self._listen_thread is None and not self._closed:
            self._listen_thread = threading.Thread(target=self._listen_loop, name="sessionwatch-pg-listen", daemon=True)
            self._listen_thread.start()

    def _listen_loop(self) -> None:
        backoff = self.backoff_initial_s
        while not self._stop.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = psycopg.connect(
                    self._conninfo,
                    autocommit=True,
                    connect_timeout=5,
                    keepalives=1,
                    keepalives_idle=30,
                    keepalives_interval=10,
                    keepalives_count=3,
                    **self._connect_kwargs,
                )
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                with self._wake_lock:
                    self._listen_epoch += 1
                self.listener_connects += 1
                self.listening.set()
                backoff = self.backoff_initial_s
                self._listen_until_error(conn)
            except Exception as exc:  # noqa: BLE001 - the database went away, or refused us: back off and retry
                if not self._stop.is_set():
                    log.warning("wake listener: %s; reconnecting in %.1f s", exc, backoff)
            finally:
                self.listening.clear()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - closing a broken connection: nothing left to do
                        pass
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, self.backoff_max_s)

    def _listen_until_error(self, conn: psycopg.Connection[Any]) -> None:
        last_io = time.monotonic()
        fd = conn.fileno()
        while not self._stop.is_set():
            timeout = max(0.0, self.keepalive_s - (time.monotonic() - last_io))
            ready, _, _ = select.select([fd, self._pipe_r], [], [], timeout)
            if self._pipe_r in ready:
                return
            if fd in ready:
                for note in conn.notifies(timeout=0):
                    self._on_notify(note.payload)
                last_io = time.monotonic()
            elif time.monotonic() - last_io >= self.keepalive_s:
                conn.execute("SELECT 1")  # liveness probe: a dead server surfaces as an error here
                last_io = time.monotonic()

    def _on_notify(self, payload: str) -> None:
        if payload.startswith(self._own_prefix):
            return  # this process delivered those itself
        try:
            data = json.loads(payload)
            items = [(str(w), str(t), int(s or 0)) for w, t, s in zip(data["w"], data["t"], data["s"], strict=True)]
        except (ValueError, TypeError, KeyError):
            log.warning("ignoring a malformed wake notification: %.200s", payload)
            return
        listener = self._listener
        for w, t, s in items:
            if self._notified(w, t, s) and not is_subagent_key(w) and listener is not None:
                try:
                    listener(WakeRequest(w, t))
                except Exception:
                    log.exception("wake listener callback failed")

    def poll_wakes(self, watchers: Iterable[str]) -> list[WakeRequest]:
        """Waking notices stamped after the last poll for these (subscribed) watchers.

        Wake positions are allocated under the writer lock, so they become visible in commit order and
        "wake_seq > last" misses nothing. ``last`` also moves past what NOTIFY delivered, but only when
        the listener stayed connected since the previous poll (then every commit in between was
        notified); after a gap it stays put, and this query finds what the gap swallowed.
        """
        with self._wake_lock:
            epoch, notified_up_to = self._listen_epoch, self._notify_max
            self._notify_max = 0
        continuous = self.listening.is_set() and epoch == self._epoch_at_poll
        self._epoch_at_poll = epoch
        ws = [w for w in watchers if not is_subagent_key(w)]
        rows: list[Any] = []
        if ws:
            try:
                rows = self._all(_POLL, {"last": self._wake_last, "ws": ws, "cap": self._queue_cap})
            except psycopg.Error as exc:
                now = time.monotonic()
                if now - self._poll_warned_at > 30:
                    self._poll_warned_at = now
                    log.warning("wake poll failed (will retry): %s", exc)
                self._epoch_at_poll = -1  # not caught up: do not move past anything next time
                return []
        out: list[WakeRequest] = []
        top = max(self._wake_last, notified_up_to) if continuous else self._wake_last
        for w, t, seq in rows:
            top = max(top, seq)
            if self._unseen(w, t, seq):
                out.append(WakeRequest(w, t))
        self._wake_last = top
        return out

    def try_lock(self, name: str) -> Any:
        """Hold a session-level advisory lock (say, for one monitor tick); None when another holds it."""
        key = lock_key(self.schema, "lock:" + name)
        conn = self._pool.getconn()
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]  # type: ignore[index]
        except BaseException:
            self._pool.putconn(conn)
            raise
        if not got:
            self._pool.putconn(conn)
            return None
        return _AdvisoryLock(self._pool, conn, key)
