"""``sessionwatch hook claude-code|codex``: one hook run, from the host's JSON on stdin to its answer.

It sits on the person's prompt path, so it never fails and never waits long: any problem (bad input, a
store or gateway that is down, an unknown session) answers "nothing to add" with exit 0 and is logged
(to ``hooks.log`` in the state directory unless ``--log-file`` says otherwise). It reads at most
``MAX_INPUT_BYTES`` of stdin (the rest is read and dropped in small chunks, never held), never creates a
store, and spends at most ``down.BUDGET_S`` per run on a gateway or PostgreSQL server that does not
answer, which later runs then skip for ``down.REMEMBER_S`` (see down.py). Imports are kept to what one
run needs; the engine or the HTTP client is loaded only when it is used.

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
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

from . import host_sessions
from .delivery import AnswerState, state_dir
from .down import REMEMBER_S, Budget, DownMark, Missed, bounded, budget_s, public
from .hosts import HOSTS, SESSION_START, STOP, USER_PROMPT_SUBMIT, Host

if TYPE_CHECKING:
    from ..types import QueueEntry

log = logging.getLogger("sessionwatch.hook")
T = TypeVar("T")

SESSION_ENV = host_sessions.SESSION_ENV
AGENT_ENV = host_sessions.AGENT_ENV
NUDGE_RETRY_MS = 10_000  # how long the nudge keeps looking for the prompt's row: the host writes it after
# the hook returned, seconds later on a busy machine; a miss waits for the monitor's tick (60 s)
MAX_INPUT_BYTES = 1 << 20  # the hosts' JSON is a few KiB; more is not a hook input we can use
_DISCARD_CHUNK = 1 << 16


class Options(NamedTuple):  # not a dataclass: importing dataclasses is a noticeable part of a hook run
    host: Host
    session: str | None = None
    agent: str | None = None
    store: str | None = None
    gateway: str | None = None
    token: str | None = None
    nudge: bool = True
    nudge_retry_ms: int = NUDGE_RETRY_MS
    foreground_nudge: bool = False  # run the nudge before returning (no fork): for hosts without fork
    deliver: bool = True  # False: only write what the event says (a detached run, see cli/fast.py)
    acknowledge: tuple[int, ...] = ()  # the answer a quick delivery held, to acknowledge (cli/fast.py)


LOG_MAX_BYTES = 1 << 20


def _rotate(path: str) -> None:
    """Keep the log at about 2 MiB (the file and one older copy). Checked once per run, as it opens:
    logging.handlers' RotatingFileHandler would cost a hook run the import of socket and pickle."""
    try:
        if os.path.getsize(path) > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except OSError:
        pass


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
            path = log_file or str(state_dir() / "hooks.log")
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            _rotate(path)
            handler = logging.FileHandler(path, encoding="utf-8")
    except Exception:  # noqa: BLE001 - no home folder, a file where the folder should be: run without a log
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
    log.addHandler(handler)


# -- backends ----------------------------------------------------------------------------------------
class NoStore(Exception):
    """The store a run names does not exist: a hook never creates one, so there is nothing to read."""


def _postgres_exists(url: str, budget: Budget) -> None:
    """Raise NoStore unless the database holds a sessionwatch store, Missed when its server does not
    answer within the budget (remembered, as for a gateway). Opening the store would otherwise create
    its tables in an empty database, and wait up to 10 s for a server that is down."""
    mark = DownMark(url)
    down = mark.reason()
    if down is not None:
        raise Missed(f"PostgreSQL at {public(url)} {down}")
    from ..engine.stores import postgres_holds_store
    from ..errors import StoreUnreachable

    try:  # the budget's alarm holds the run to what is left
        found = bounded(budget, lambda timeout: postgres_holds_store(url, timeout))
    except (Missed, StoreUnreachable) as exc:
        why = exc.message if isinstance(exc, StoreUnreachable) else f"{exc.__class__.__name__}: {exc}"
        mark.mark(why)
        log.warning("PostgreSQL at %s did not answer: %s; hook runs skip it for %g s", public(url), why, REMEMBER_S)
        raise Missed(f"PostgreSQL at {public(url)} did not answer") from None
    if not found:
        raise NoStore(f"{public(url)} holds no sessionwatch store")


class _EngineWrites:
    """host_sessions.Writes on an engine in this process (a local store, or the gateway's own)."""

    gw: Any
    channel: str | None = None  # the room's catalog: where a prompt its host told of came in (open_backend)

    def adopt(self, key: str, catalog: str, thread_id: str) -> dict[str, Any]:
        from ..errors import NotFound

        try:
            return dict(self.gw.upstream.continue_thread(catalog, thread_id, session_key=key))
        except NotFound as exc:  # the host has not written the transcript yet: the session, without its link
            out = self.gw.put_session(key)
            return {"sessionKey": key, "linked": False, "reason": str(exc), "created": out.get("created")}

    def spawn_child(self, parent: str, child: str, run_id: str) -> dict[str, Any]:
        return dict(self.gw.call_tool("sessions_spawn", {"sessionKey": child, "runId": run_id}, caller=parent))

    def end_child(self, child: str, run_id: str, outcome: str = "ok") -> dict[str, Any]:
        return dict(self.gw.end_run(child, run_id, host_sessions.RUN_STATUS.get(outcome, "error")))

    def prompt(self, key: str, text: str, person: bool) -> dict[str, Any]:
        provenance = "external_user" if person else "internal_system"
        return dict(self.gw.inbound(key, text, channel=self.channel, provenance=provenance))

    def lifecycle(self, key: str, state: str, report: host_sessions.Report) -> dict[str, Any]:
        return dict(
            self.gw.report_lifecycle(
                key,
                state,
                pid=report.pid,
                host=report.host,
                machine=report.machine,
                outcome=report.outcome,
                at=report.at,
            )
        )


class _Local(_EngineWrites):
    """The engine on a local store, opened without a sweep, a prune or timers (a hook is a short client)."""

    def __init__(self, url: str, budget: Budget) -> None:
        from ..engine.gateway import Gateway
        from ..engine.stores import is_postgres_url
        from ..settings import settings_from_env

        if is_postgres_url(url):
            _postgres_exists(url, budget)
        self.where = url
        self.gw = Gateway.open(url, settings=settings_from_env(), sweep=False, timers=False, prune_on_open=False)
        self.remote = False

    def peek(self, key: str, agent: str | None) -> list[QueueEntry]:
        return list(self.gw.peek_system_events(key, agent_id=agent))

    def ack(self, key: str, agent: str | None, ids: list[int]) -> None:
        self.gw.ack_system_events(key, ids, agent_id=agent)

    def withheld(self, key: str, agent: str | None, shown: list[QueueEntry]) -> int:
        return int(self.gw.withheld_notices(key, agent_id=agent, shown=shown))

    def thread_links(self, catalog: str, thread_id: str | None, path: str | None) -> list[dict[str, Any]]:
        return list(self.gw.thread_links(catalog, thread_id, path))

    def nudge(self, key: str, agent: str | None, retry_ms: int) -> dict[str, Any]:
        return self.gw.upstream.nudge(key, agent, retry_ms=retry_ms)

    def close(self) -> None:
        self.gw.close()


class _Remote:
    """A running gateway over HTTP (``--gateway``): every call within the run's budget; the first miss
    is remembered (``DownMark``) and ends the run's calls to it."""

    channel: str | None = None  # as _EngineWrites.channel

    def __init__(self, url: str, token: str | None, budget: Budget) -> None:
        self.where = url
        self.budget = budget
        self.mark = DownMark(url)
        down = self.mark.reason()
        if down is not None:  # skipped before the HTTP client is even imported
            raise Missed(f"the gateway at {public(url)} is {down}")
        from ..client import GatewayClient

        self.client = GatewayClient(url, token=token, timeout=budget.left())
        self.remote = True
        self.missed: str | None = None

    def _call(self, fn: Callable[[], T]) -> T:
        if self.missed is not None:
            raise Missed(self.missed)

        def timed(left: float) -> T:
            self.client.timeout = left  # each phase of the request gets at most what is left
            return fn()

        try:
            return bounded(self.budget, timed)
        except Missed as exc:
            why = str(exc)
        except Exception as exc:
            if not _transport_failure(exc):
                raise  # the gateway answered (an error is an answer): nothing to remember
            why = f"{exc.__class__.__name__}: {exc}"
        self.missed = f"the gateway at {public(self.where)} did not answer: {why}"
        self.mark.mark(why)
        log.warning("%s; hook runs skip it for the next %g s", self.missed, REMEMBER_S)
        raise Missed(self.missed)

    def peek(self, key: str, agent: str | None) -> list[QueueEntry]:
        return list(self._call(lambda: self.client.peek_system_events(key, agent_id=agent)))

    def answer(self, host: Host, key: str, agent: str | None, data: dict[str, Any], stdout: IO[str]) -> bool:
        """Have the gateway answer the hook and print its answer; False when it has no hook route."""
        from ..errors import NotFound

        try:
            answer = self._call(lambda: self.client.answer_hook(key, host.name, data, agent_id=agent))
        except NotFound as exc:
            log.debug("the gateway has no hook route (%s): peeking instead", exc)
            return False
        if answer:
            try:
                stdout.write(json.dumps(answer) + "\n")
                stdout.flush()
            except (BrokenPipeError, OSError, ValueError) as exc:
                log.warning("the answer for %s was not taken (%s)", key, exc)
                _discard(stdout)
        return True

    def ack(self, key: str, agent: str | None, ids: list[int]) -> None:
        self._call(lambda: self.client.ack_system_events(key, ids, agent_id=agent))

    def withheld(self, key: str, agent: str | None, shown: list[QueueEntry]) -> int:
        return 0  # only a gateway without the hook route gets here, and it does not count them either

    def adopt(self, key: str, catalog: str, thread_id: str) -> dict[str, Any]:
        from ..errors import NotFound

        try:
            link = self._call(lambda: self.client.link(key))
        except NotFound:  # no such session yet
            link = None
        if link and link.get("threadId") == thread_id:
            return {"sessionKey": key, "linked": True}
        try:
            return dict(self._call(lambda: self.client.continue_thread(catalog, thread_id, session_key=key)))
        except NotFound as exc:  # the host has not written the transcript yet (or the gateway cannot see it)
            out = self._call(lambda: self.client.put_session(key))
            return {"sessionKey": key, "linked": False, "reason": str(exc), "created": out.get("created")}

    def spawn_child(self, parent: str, child: str, run_id: str) -> dict[str, Any]:
        args = {"sessionKey": child, "runId": run_id}
        return dict(self._call(lambda: self.client.call_tool("sessions_spawn", args, caller=parent)))

    def end_child(self, child: str, run_id: str, outcome: str = "ok") -> dict[str, Any]:
        status = host_sessions.RUN_STATUS.get(outcome, "error")
        return dict(self._call(lambda: self.client.end_run(child, run_id, status)))

    def lifecycle(self, key: str, state: str, report: host_sessions.Report) -> dict[str, Any]:
        return dict(
            self._call(
                lambda: self.client.report_lifecycle(
                    key,
                    state,
                    pid=report.pid,
                    host=report.host,
                    machine=report.machine,
                    outcome=report.outcome,
                    at=report.at,
                )
            )
        )

    def prompt(self, key: str, text: str, person: bool) -> dict[str, Any]:
        provenance = "external_user" if person else "internal_system"
        return dict(self._call(lambda: self.client.inbound(key, text, channel=self.channel, provenance=provenance)))

    def thread_links(self, catalog: str, thread_id: str | None, path: str | None) -> list[dict[str, Any]]:
        return []  # a gateway lists no links by thread: give --session (or $SESSIONWATCH_SESSION) there

    def own_link(self, who: host_sessions.Who | None, thread_id: str | None) -> list[dict[str, Any]]:
        """The session's link when it is this very thread (a worker installed with its own --session)."""
        if who is None or thread_id is None:
            return []
        try:
            link = self._call(lambda: self.client.link(who.key, who.agent))
        except Exception as exc:  # noqa: BLE001 - no link (or no gateway: logged by _call) means no nudge
            log.debug("no link for %s: %s", who.key, exc)
            return []
        return [link] if link and link.get("threadId") == thread_id else []

    def nudge(self, key: str, agent: str | None, retry_ms: int) -> dict[str, Any]:
        # Detached, after the answer: not the run's budget. The gateway looks again for up to retry_ms
        # (the host writes the prompt's row after the hook returned), so the timeout outlasts that.
        if self.missed is not None:
            raise Missed(self.missed)
        self.client.timeout = budget_s()
        return self.client.nudge(key, agent, wait_ms=retry_ms)

    def close(self) -> None:
        self.client.close()


def _transport_failure(exc: BaseException) -> bool:
    """The gateway did not answer (refused, unreachable, timed out, cut off), as opposed to answering
    with an error. The client raises StoreUnreachable from the HTTP library's transport error."""
    import httpx  # loaded already: the client uses it

    return isinstance(exc.__context__, httpx.TransportError) or isinstance(exc, httpx.TransportError)


def _store_url(opts: Options) -> str | None:
    """The local store URL, or None when its SQLite file does not exist or is empty (nothing to read; a
    hook never creates a store)."""
    from ..engine.stores import default_sqlite_path, is_postgres_url, sqlite_path

    url = opts.store or os.environ.get("SESSIONWATCH_STORE") or f"sqlite:///{default_sqlite_path()}"
    if is_postgres_url(url):
        return url  # whether it holds a store is asked of the server (_postgres_exists)

    path = sqlite_path(url)
    try:
        exists = path != ":memory:" and os.path.getsize(os.path.expanduser(path)) > 0
    except OSError:
        exists = False
    if not exists:
        log.info("no store at %s: a hook never creates one, so there is nothing to add", path)
        return None
    return url


def open_backend(opts: Options, budget: Budget | None = None) -> _Local | _Remote | None:
    """The run's store or gateway; None when there is no store to read. Raises Missed when the server
    does not answer (or is remembered as down)."""
    budget = budget or Budget()
    backend: _Local | _Remote
    if opts.gateway:
        backend = _Remote(opts.gateway, opts.token, budget)
    else:
        url = _store_url(opts)
        if url is None:
            return None
        try:
            backend = _Local(url, budget)
        except NoStore as exc:
            log.info("%s: a hook never creates a store, so there is nothing to add", exc)
            return None
    backend.channel = opts.host.catalog
    return backend


# -- one run -------------------------------------------------------------------------------------------
def _drop_input(stdin: IO[bytes]) -> int:
    """Read the rest of stdin and drop it, a chunk at a time (the host may block until it is read)."""
    dropped = 0
    while chunk := stdin.read(_DISCARD_CHUNK):
        dropped += len(chunk)
    return dropped


def _read_input(stdin: IO[bytes] | None) -> dict[str, Any] | None:
    if stdin is None:
        log.warning("the hook has no stdin: nothing to read")
        return None
    try:
        raw = stdin.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            size = len(raw) + _drop_input(stdin)
            log.warning(
                "the hook input is %d bytes, over the %d-byte limit: ignored (what is pending stays queued)",
                size,
                MAX_INPUT_BYTES,
            )
            return None
    except (OSError, ValueError) as exc:
        log.warning("the hook input could not be read: %s", exc)
        return None
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        log.warning("the hook input is not JSON: %s", "nested too deep" if isinstance(exc, RecursionError) else exc)
        return None
    if not isinstance(data, dict):
        log.warning("the hook input is not a JSON object")
        return None
    return data


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def answerable(host: Host, data: dict[str, Any]) -> str | None:
    """The event of a hook input the hook answers, or None (twin: quick.nothing_to_do's first checks).
    An event from inside a subagent is answered with the subagent's own notices (host_sessions.apply):
    what it prints reaches only the subagent's context, so the parent's wait for the parent's next hook."""
    event = data.get("hook_event_name")
    if not isinstance(event, str) or event not in host.events:
        log.debug("event %r: nothing to do", event)
        return None
    if event == STOP and data.get("stop_hook_active") is True:
        log.debug("Stop hook after a block: the turn ends (never blocked twice in a row)")
        return None
    return event


class InProcess(_EngineWrites):
    """A gateway's own engine, for the hook it answers over HTTP (``POST /v1/sessions/{key}/hooks/{host}``)."""

    def __init__(self, gw: Any, where: str) -> None:
        self.gw = gw
        self.where = where
        self.remote = False

    def peek(self, key: str, agent: str | None) -> list[QueueEntry]:
        return list(self.gw.peek_system_events(key, agent_id=agent))

    def ack(self, key: str, agent: str | None, ids: list[int]) -> None:
        self.gw.ack_system_events(key, ids, agent_id=agent)

    def withheld(self, key: str, agent: str | None, shown: list[QueueEntry]) -> int:
        return int(self.gw.withheld_notices(key, agent_id=agent, shown=shown))


def answer_in_process(gw: Any, where: str, host: str, key: str, agent: str | None, data: dict[str, Any]) -> str:
    """What a command hook would print for ``data`` (the host's hook input) as session ``key``, answered by
    the gateway itself: the same rules, the same at-least-once state (kept in the gateway's state folder,
    per ``where``). An empty string when there is nothing to give."""
    spec = HOSTS[host]
    event = answerable(spec, data)
    raw_event = data.get("hook_event_name")
    if event is None and raw_event not in (*spec.events, *spec.observes):
        return ""
    backend = InProcess(gw, where)
    backend.channel = spec.catalog
    who = host_sessions.Who(key, agent, "hook route", True)
    report = host_sessions.Report(spec.name, int(time.time() * 1000))  # no pid: the host's machine is not ours
    target = host_sessions.apply(backend, spec.catalog, str(raw_event), data, who, report)
    import io

    out = io.StringIO()
    printed = event is not None and deliver(backend, target, agent, spec, event, out)
    if raw_event == STOP and not printed:
        host_sessions.turn_ended(backend, target, report, data)
    return out.getvalue()


def run(opts: Options, stdin: IO[bytes] | None, stdout: IO[str]) -> int:
    """One hook run. Always returns 0: the person's prompt must go through whatever happens here."""
    started = time.monotonic()
    data = _read_input(stdin)
    if data is None:
        return 0
    event = answerable(opts.host, data)
    raw_event = data.get("hook_event_name")
    if event is None and raw_event not in (*opts.host.events, *opts.host.observes):
        return 0
    report = _report(opts.host.name, started)
    thread_id, path = _text(data.get("session_id")), _text(data.get("transcript_path"))
    nudge_links: list[dict[str, Any]] = []
    try:
        backend = open_backend(opts)
    except Missed as exc:  # skipped or missed: the notices wait in the queue for a later run
        log.warning("%s hook: no answer, %s", event, exc)
        return 0
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
        who = host_sessions.resolve(opts.host.name, opts.session, opts.agent, data, links)
        answered_there = False
        key = who.key if who is not None else ""
        if who is None:
            log.debug("%s hook: host session %s stands for no sessionwatch session: nothing to add", event, thread_id)
        elif isinstance(backend, _Remote):
            # The gateway answers it (its hook route, which also writes what the event says of subagents
            # and of the lifecycle): one answer state per session, shared with the HTTP hooks a host may
            # post to the same gateway, and the nudge done there. An older gateway without the route:
            # all of it from here. The gateway cannot see this machine's processes: the pid goes first.
            who = host_sessions.adopted(backend, opts.host.catalog, data, who)
            if raw_event == SESSION_START:
                host_sessions.apply(backend, opts.host.catalog, str(raw_event), data, who, report)
            answered_there = backend.answer(opts.host, who.key, who.agent, data, stdout)
            if not answered_there:
                key = host_sessions.apply(backend, opts.host.catalog, str(raw_event), data, who, report)
                printed = event is not None and deliver(backend, key, who.agent, opts.host, event, stdout)
                if raw_event == STOP and not printed:
                    host_sessions.turn_ended(backend, key, report, data)
        else:
            key = host_sessions.apply(backend, opts.host.catalog, str(raw_event), data, who, report)
            printed = event is not None and opts.deliver and deliver(backend, key, who.agent, opts.host, event, stdout)
            if opts.acknowledge:
                acknowledge(backend, key, who.agent, list(opts.acknowledge))
            if raw_event == STOP and not printed:
                host_sessions.turn_ended(backend, key, report, data)
        if (
            who is not None
            and event == USER_PROMPT_SUBMIT
            and opts.nudge
            and not answered_there
            and key == who.key
            and not opts.host.tells_sender  # the host's side told who sent the prompt: nothing to look for
        ):  # after the answer: a slow link lookup cannot delay it
            nudge_links = backend.own_link(who, thread_id) if isinstance(backend, _Remote) else links
    except Missed as exc:
        log.warning("%s hook: no answer, %s (the notices wait for a later run)", event, exc)
    except Exception as exc:  # noqa: BLE001 - a hook never fails the host's prompt
        log.warning("%s hook: no answer: %s: %s", event, exc.__class__.__name__, exc)
    finally:
        backend.close()
    log.debug("%s hook answered in %.1f ms", event, (time.monotonic() - started) * 1000)
    if nudge_links:
        start_nudge(opts, nudge_links)
    return 0


def deliver(
    backend: _Local | _Remote | InProcess, key: str, agent: str | None, host: Host, event: str, stdout: IO[str]
) -> bool:
    """Acknowledge the previous complete answer, then print what is pending (see delivery.py). One run
    of a session at a time: a host may start two hooks at once (its start and the first prompt), and the
    second must see the first's answer as given, not print the same notices again."""
    state = AnswerState(backend.where, key, agent)
    with state.exclusive():
        return _deliver(backend, state, key, agent, host, event, stdout)


def _deliver(
    backend: _Local | _Remote | InProcess,
    state: AnswerState,
    key: str,
    agent: str | None,
    host: Host,
    event: str,
    stdout: IO[str],
) -> bool:
    """Whether something was printed."""
    prev = state.load()
    held: set[int] = set()
    if prev is not None and prev["answered"]:
        try:
            backend.ack(key, agent, prev["ids"])
            state.clear()
        except Exception as exc:  # noqa: BLE001 - delivered already: never print them again, acknowledge next time
            log.warning("acknowledging %s for %s failed (retried next run): %s", prev["ids"], key, exc)
            held = set(prev["ids"])
    queued = backend.peek(key, agent)
    entries = [e for e in queued if e["id"] not in held]
    if not entries:
        log.debug("%s hook for %s: nothing pending", event, key)
        return False
    ids = [int(e["id"]) for e in entries]
    if not held:
        state.save(ids, answered=False)  # a run killed before the flush below leaves them unanswered
    lines = [e["line"] for e in entries]
    more = _withheld(backend, key, agent, queued)
    if more:  # the cap held notices back: say so (a line, not an entry: nothing to acknowledge)
        from ..notices import withheld_line

        lines.append(withheld_line(more))
    text = "\n".join(lines)
    try:
        stdout.write(host.answer(event, text))
        stdout.flush()
    except (BrokenPipeError, OSError, ValueError) as exc:  # the host is gone: they stay queued
        log.warning("%s hook for %s: the answer was not taken (%s); it is given again next run", event, key, exc)
        _discard(stdout)
        return False
    if not held:
        state.save(ids, answered=True)
    log.info("%s hook for %s delivered %d notice(s): %s", event, key, len(ids), ids)
    return True


def acknowledge(backend: _Local | _Remote | InProcess, key: str, agent: str | None, ids: list[int]) -> None:
    """Acknowledge an answer the quick delivery held (``quick_delivery.py``: it printed what came after it
    and left this to the detached run). The answer state is cleared once it holds nothing else; when it
    holds the newer answer too, the next run acknowledges that (again, harmlessly, for these ids)."""
    state = AnswerState(backend.where, key, agent)
    with state.exclusive():
        try:
            backend.ack(key, agent, ids)
        except Exception as exc:  # noqa: BLE001 - still held by the state: the next run tries again
            log.warning("acknowledging %s for %s failed (retried next run): %s", ids, key, exc)
            return
        now = state.load()
        if now is not None and set(now["ids"]) <= set(ids):
            state.clear()


def _withheld(backend: _Local | _Remote | InProcess, key: str, agent: str | None, queued: list[QueueEntry]) -> int:
    """How many watched sessions changed beyond the full queue just peeked; 0 when that cannot be read
    (the notices are delivered anyway)."""
    try:
        return backend.withheld(key, agent, queued)
    except Missed:
        raise
    except Exception as exc:  # noqa: BLE001 - the line is a courtesy; the notices go out without it
        log.warning("counting the withheld notices of %s failed: %s: %s", key, exc.__class__.__name__, exc)
        return 0


def _report(host: str, started: float) -> host_sessions.Report:
    """This run's lifecycle reporter: the host's process on this machine, the run's start as the time."""
    from .host_process import hook_started_at, session_pid

    at = hook_started_at() or int((time.time() - (time.monotonic() - started)) * 1000)
    machine = os.environ.get("SESSIONWATCH_MACHINE") or os.uname().nodename  # twin: engine.lifecycle.this_machine
    return host_sessions.Report(host, at, session_pid(host), machine)


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


def main(host: str | None, *, stdin: Any = None, **kwargs: Any) -> int:
    """One run for ``host``; ``stdin``: the input already taken from the process's stdin (``quick.Input``)."""
    stdin = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
    if host not in HOSTS:  # told in the log already: take the input off the host's hands, answer nothing
        try:
            if stdin is not None:
                _drop_input(stdin)
        except (OSError, ValueError):
            pass
        return 0
    opts = Options(HOSTS[host], **kwargs)
    return run(opts, stdin, sys.stdout)
