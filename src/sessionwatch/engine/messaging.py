"""Messaging: a session's transcript, and waiting for the reply a ``sessions_send`` asked for."""

from __future__ import annotations

import threading
from typing import Any

from .. import validation
from ..store.records import MessageRow
from .core import GatewayCore

ROLES = ("user", "assistant", "system")


class Messaging(GatewayCore):
    """Transcript appends and the reply wait (woken on every append)."""

    _reply_cv: threading.Condition

    # -- transcripts -----------------------------------------------------------------------------
    def append_message(
        self, key: object, role: object, text: object, *, agent_id: object = None, imported: bool = False
    ) -> dict[str, Any]:
        """Append to a session's transcript (an assistant reply answers a waiting ``sessions_send``)."""
        row = self.session(key, agent_id)
        role = validation.one_of(role, "role", ROLES)
        body = validation.text(text, "text", allow_empty=True)
        msg = self.store.append_message(
            MessageRow(0, row.session_key, row.agent_id, role, body, self.clock(), imported=bool(imported))
        )
        self._notify_messages()
        return msg.to_json()

    def _notify_messages(self) -> None:
        with self._reply_cv:
            self._reply_cv.notify_all()

    def wait_for_reply(self, key: str, agent: str, after_id: int, timeout_s: float) -> MessageRow | None:
        """The first assistant message after ``after_id`` within ``timeout_s`` of real time."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            replies = self.store.messages(key, agent, 200, after_id=after_id, role="assistant")
            if replies:
                return replies[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return None
            with self._reply_cv:
                self._reply_cv.wait(min(remaining, 0.25))

    def own_user_texts(self, key: str, agent: str) -> list[str]:
        return self._safe(lambda: self.store.own_user_texts(key, agent, self.settings.own_recent_texts), [])
