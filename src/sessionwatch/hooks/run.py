"""``sessionwatch hook claude-code|codex``: one hook run, from the host's JSON on stdin to its answer.

It sits on the person's prompt path, so it never fails and never waits long: any problem (bad input, a
store or gateway that is down, an unknown session) answers "nothing to add" at once with exit 0 and is
logged (to ``hooks.log`` in the state directory unless ``--log-file`` says otherwise). Imports are kept
to what one run needs; the engine or the HTTP client is loaded only when it is used.

Which session the host session stands for: ``--session``, else ``$SESSIONWATCH_SESSION``, else the
adoption link whose thread is the hook's ``session_id`` (or whose file is its ``transcript_path``).
On ``UserPromptSubmit`` in an adopted thread the run also nudges the monitor for that link, after it
answered, in a detached child process (the host's row may be written a moment later; it retries).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import IO, Any

from ..types import QueueEntry
from .delivery import AnswerState, state_dir
from .hosts import HOSTS, USER_PROMPT_SUBMIT, Host

log = logging.getLogger("sessionwatch.hook")

SESSION_ENV = "SESSIONWATCH_SESSION"
AGENT_ENV = "SESSIONWATCH_AGENT"
GATEWAY_TIMEOUT_S = 2.0  # a gateway that does not answer within this is treated as down
NUDGE_RETRY_MS = 2000  # how long the nudge keeps looking for the prompt's row


@dataclass
class Options:
    host: Host
    session: str | None = None
    agent: str | None = None
    store: str | None = None
    gateway: str | None = None
    token: str | None = None
    nudge: bool = True
    nudge_retry_ms: int = NUDGE_RETRY_MS
    foreground_nudge: bool = False  # run the nudge before returning (no fork): for hosts without fork


def setup_logging(log_file: str | None, level: str) -> None:
    """Hook logs never go to the host's stderr unless asked (``--log-file -``)."""
    log.propagate = False
    log.setLevel(getattr(logging, level.upper(), logging.WARNING))
    for h in list(log.handlers):
        log.removeHandler(h)
    try:
        if log_file == "-":
            handler: logging.Handler = logging.StreamHandler(sys.stderr)
        else:
            from logging.handlers import RotatingFileHandler

            path = log_file or str(state_dir() / "hooks.log")
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            # one line per delivery: capped at about 2 MiB (the file and one older copy)
            handler = RotatingFileHandler(path, maxBytes=1 << 20, backupCount=1, encoding="utf-8")
    except OSError:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
    log.addHandler(handler)


# -- backends ----------------------------------------------------------------------------------------
class _Local:
    """The engine on a local store, opened without a sweep, a prune or timers (a hook is a short client)."""

    def __init__(self, url: str) -> None:
        from ..engine.gateway import Gateway
        from ..settings import settings_from_env
        from ..store import open_store

        self.where = url
        self.gw = Gateway(open_store(url), settings=settings_from_env(), sweep=False, timers=False, prune_on_open=False)
        self.remote = False

    def peek(self, key: str, agent: str | None) -> list[QueueEntry]:
        return list(self.gw.peek_system_events(key, agent_id=agent))

    def ack(self, key: str, agent: str | None, ids: list[int]) -> None:
        self.gw.ack_system_events(key, ids, agent_id=agent)

    def thread_links(self, catalog: str, thread_id: str | None, path: str | None) -> list[dict[str, Any]]:
        from ..upstream.links import thread_links  # not the upstream service: it imports the HTTP client

        return thread_links(self.gw.store, catalog, thread_id, path)

    def nudge(self, key: str, agent: str | None, retry_ms: int) -> dict[str, Any]:
        return self.gw.upstream.nudge(key, agent, retry_ms=retry_ms)

    def close(self) -> None:
        self.gw.close()


class _Remote:
    """A running gateway over HTTP (``--gateway``)."""

    def __init__(self, url: str, token: str | None) -> None:
        from ..client import GatewayClient

        self.where = url
        self.client = GatewayClient(url, token=token, timeout=GATEWAY_TIMEOUT_S)
        self.remote = True

    def peek(self, key: str, agent: str | None) -> list[QueueEntry]:
        return list(self.client.peek_system_events(key, agent_id=agent))

    def ack(self, key: str, agent: str | None, ids: list[int]) -> None:
        self.client.ack_system_events(key, ids, agent_id=agent)

    def thread_links(self, catalog: str, thread_id: str | None, path: str | None) -> list[dict[str, Any]]:
        return []  # a gateway lists no links by thread: give --session (or $SESSIONWATCH_SESSION) there

    def own_link(self, who: tuple[str, str | None, str] | None, thread_id: str | None) -> list[dict[str, Any]]:
        """The session's link when it is this very thread (a worker installed with its own --session)."""
        if who is None or thread_id is None:
            return []
        try:
            link = self.client.link(who[0], who[1])
        except Exception as exc:  # noqa: BLE001 - no link is an answer here, not an error
            log.debug("no link for %s: %s", who[0], exc)
            return []
        return [link] if link and link.get("threadId") == thread_id else []

    def nudge(self, key: str, agent: str | None, retry_ms: int) -> dict[str, Any]:
        # The gateway looks again for up to retry_ms: the host writes the prompt's row after the hook.
        return self.client.nudge(key, agent, wait_ms=retry_ms)

    def close(self) -> None:
        self.client.close()


def _store_url(opts: Options) -> str | None:
    """The local store URL, or None when the default SQLite file does not exist (nothing to read; a hook
    never creates a store)."""
    if opts.store:
        return opts.store
    env = os.environ.get("SESSIONWATCH_STORE")
    if env:
        return env
    from ..store import default_sqlite_path

    path = default_sqlite_path()
    return f"sqlite:///{path}" if path.exists() else None


def open_backend(opts: Options) -> _Local | _Remote | None:
    if opts.gateway:
        return _Remote(opts.gateway, opts.token)
    url = _store_url(opts)
    if url is None:
        log.debug("no store: the default store file does not exist yet")
        return None
    return _Local(url)


# -- one run -------------------------------------------------------------------------------------------
def _read_input(stdin: IO[bytes]) -> dict[str, Any] | None:
    try:
        data = json.loads(stdin.read() or b"{}")
    except (ValueError, OSError) as exc:
        log.warning("the hook input is not JSON: %s", exc)
        return None
    if not isinstance(data, dict):
        log.warning("the hook input is not a JSON object")
        return None
    return data


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def resolve_session(opts: Options, links: list[dict[str, Any]]) -> tuple[str, str | None, str] | None:
    """(session key, agent id, where it came from), or None when the host session stands for none."""
    agent = opts.agent or os.environ.get(AGENT_ENV) or None
    if opts.session:
        return opts.session, agent, "--session"
    env = os.environ.get(SESSION_ENV)
    if env:
        return env, agent, SESSION_ENV
    if links:
        return links[0]["sessionKey"], links[0]["agentId"], "adoption link"
    return None


def run(opts: Options, stdin: IO[bytes], stdout: IO[str]) -> int:
    """One hook run. Always returns 0: the person's prompt must go through whatever happens here."""
    started = time.monotonic()
    data = _read_input(stdin)
    if data is None:
        return 0
    event = data.get("hook_event_name")
    if event not in opts.host.events:
        log.debug("event %r: nothing to do", event)
        return 0
    thread_id, path = _text(data.get("session_id")), _text(data.get("transcript_path"))
    nudge_links: list[dict[str, Any]] = []
    try:
        backend = open_backend(opts)
    except Exception as exc:  # noqa: BLE001 - the store or gateway is down: answer nothing, now
        log.warning(
            "%s hook: no answer, the store or gateway is unavailable: %s: %s", event, exc.__class__.__name__, exc
        )
        return 0
    if backend is None:
        return 0
    try:
        links: list[dict[str, Any]] = []
        if thread_id or path:
            try:
                links = backend.thread_links(opts.host.catalog, thread_id, path)
            except Exception as exc:  # noqa: BLE001 - the hook still answers, without the link
                log.warning("looking up the link of thread %s failed: %s", thread_id, exc)
        who = resolve_session(opts, links)
        if event == USER_PROMPT_SUBMIT and opts.nudge:
            nudge_links = backend.own_link(who, thread_id) if isinstance(backend, _Remote) else links
        if who is None:
            log.debug("%s hook: host session %s stands for no sessionwatch session: nothing to add", event, thread_id)
        else:
            deliver(backend, who[0], who[1], opts.host, event, stdout)
    except Exception as exc:  # noqa: BLE001 - a hook never fails the host's prompt
        log.warning("%s hook: no answer: %s: %s", event, exc.__class__.__name__, exc)
    finally:
        backend.close()
    log.debug("%s hook answered in %.1f ms", event, (time.monotonic() - started) * 1000)
    if nudge_links:
        start_nudge(opts, nudge_links)
    return 0


def deliver(backend: _Local | _Remote, key: str, agent: str | None, host: Host, event: str, stdout: IO[str]) -> None:
    """Acknowledge the previous complete answer, then print what is pending (see delivery.py)."""
    state = AnswerState(backend.where, key, agent)
    prev = state.load()
    held: set[int] = set()
    if prev is not None and prev["answered"]:
        try:
            backend.ack(key, agent, prev["ids"])
            state.clear()
        except Exception as exc:  # noqa: BLE001 - delivered already: never print them again, acknowledge next time
            log.warning("acknowledging %s for %s failed (retried next run): %s", prev["ids"], key, exc)
            held = set(prev["ids"])
    entries = [e for e in backend.peek(key, agent) if e["id"] not in held]
    if not entries:
        log.debug("%s hook for %s: nothing pending", event, key)
        return
    ids = [int(e["id"]) for e in entries]
    if not held:
        state.save(ids, answered=False)  # a run killed before the flush below leaves them unanswered
    text = "\n".join(e["line"] for e in entries)
    try:
        stdout.write(host.answer(event, text))
        stdout.flush()
    except (BrokenPipeError, OSError, ValueError) as exc:  # the host is gone: they stay queued
        log.warning("%s hook for %s: the answer was not taken (%s); it is given again next run", event, key, exc)
        _discard(stdout)
        return
    if not held:
        state.save(ids, answered=True)
    log.info("%s hook for %s delivered %d notice(s): %s", event, key, len(ids), ids)


def _discard(stdout: IO[str]) -> None:
    """Point a dead stdout at the null device, so the interpreter's final flush cannot fail the exit code."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


# -- the nudge (after the answer) ----------------------------------------------------------------------
def start_nudge(opts: Options, links: list[dict[str, Any]]) -> None:
    """Nudge in a detached child, so the host gets its answer (and exit) now; inline where there is no
    fork or when asked (``foreground_nudge``)."""
    if opts.foreground_nudge or not hasattr(os, "fork"):
        _nudge(opts, links, opts.nudge_retry_ms if opts.foreground_nudge else 0)
        return
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stdout must not stop the nudge
        pass
    try:
        pid = os.fork()
    except OSError as exc:
        log.warning("could not start the nudge: %s", exc)
        return
    if pid:
        return
    # the child: leave the host's process group and pipes, so the host sees the hook finish now
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _nudge(opts, links, opts.nudge_retry_ms)
    except BaseException:
        log.exception("the nudge failed")
    finally:
        os._exit(0)


def _nudge(opts: Options, links: list[dict[str, Any]], retry_ms: int) -> None:
    try:
        backend = open_backend(opts)
    except Exception as exc:  # noqa: BLE001 - the nudge is best-effort
        log.warning("nudge: the store or gateway is unavailable: %s", exc)
        return
    if backend is None:
        return
    try:
        for link in links:
            out = backend.nudge(link["sessionKey"], link["agentId"], retry_ms)
            log.info(
                "nudge %s: %s",
                link["sessionKey"],
                {k: out.get(k) for k in ("status", "reason", "sequence", "attempts") if k in out},
            )
    except Exception as exc:  # noqa: BLE001 - the nudge is best-effort
        log.warning("nudge failed: %s: %s", exc.__class__.__name__, exc)
    finally:
        backend.close()


def main(host: str, **kwargs: Any) -> int:
    opts = Options(HOSTS[host], **kwargs)
    return run(opts, sys.stdin.buffer, sys.stdout)
