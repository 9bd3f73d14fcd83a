"""``sessionwatch [global options] hook HOST [options]``: the host runs it before every prompt and after
every tool call, so it skips click (and the command modules) and goes straight to ``hooks.run``.

A host treats any exit but 0 as a failure (Claude Code erases the person's prompt on exit 2), so a hook
invocation never reaches click's usage errors: whatever its arguments, it exits 0. An option it does not
know, a missing or bad value, an unknown host or a stray word is logged (``hooks.log``) and left out;
the run goes on with the rest (nothing at all to do without a known host). ``--help`` prints the
command's help to stderr, never to stdout, which the host would read as its answer. Anything that is not
a hook invocation (another command, ``sessionwatch --help``) is click's, as before.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..hosts.registry import NAMES as HOSTS  # the rooms' names (light: their cards only)

TYPE_CHECKING = False  # not typing's: importing typing is a noticeable part of a hook run
if TYPE_CHECKING:
    from ..hooks.order import Ticket
    from ..hooks.quick import Input

GLOBAL_VALUES = {"--store": "store", "--gateway": "gateway", "--token": "token", "--log-level": "log_level"}
GLOBAL_FLAGS = {"--json": "json"}
HOOK_VALUES = {"--session": "session", "--agent": "agent", "--nudge-wait": "nudge_wait", "--log-file": "log_file"}
HOOK_FLAGS = {"--no-nudge": "no_nudge", "--foreground-nudge": "foreground_nudge", "--json": "json"}
HELP = ("--help", "-h")
LEVELS = ("debug", "info", "warning", "error")
MAX_NUDGE_WAIT_MS = 10_000
ORDER_INPUT_BYTES = 1 << 16  # a larger hook input is not parsed again for its session id (hooks/order.py)


class Invocation:  # a plain class: importing typing (NamedTuple) is a noticeable part of a hook run
    def __init__(self, opts: dict[str, str], problems: list[str], help: bool = False) -> None:
        self.opts = opts  # what was understood; a value that was not valid is left out
        self.problems = problems  # what was left out and why (logged once the log is open)
        self.help = help

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Invocation) and (self.opts, self.problems, self.help) == (
            other.opts,
            other.problems,
            other.help,
        )

    def __repr__(self) -> str:
        return f"Invocation({self.opts!r}, {self.problems!r}, help={self.help!r})"


def split(args: list[str]) -> tuple[list[str], list[str]] | None:
    """(global options, what follows ``hook``) when ``args`` run the hook command, else None.

    Before ``hook`` only options may come (a known value option takes the next word); the first word
    that is not an option names the command."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "hook":
            return args[:i], args[i + 1 :]
        if arg in HELP or arg == "--version" or arg == "--" or not arg.startswith("-"):
            return None  # the group's own help or version, or another command
        name, eq, _ = arg.partition("=")
        i += 2 if name in GLOBAL_VALUES and not eq else 1
    return None


def _value(args: list[str], i: int) -> tuple[str, str | None, int]:
    """(option name, its value or None when missing, index after it) for ``--x v`` or ``--x=v``."""
    name, eq, value = args[i].partition("=")
    if eq:
        return name, value, i + 1
    if i + 1 < len(args) and not args[i + 1].startswith("--"):
        return name, args[i + 1], i + 2
    return name, None, i + 1


def _options(
    args: list[str], values: dict[str, str], flags: dict[str, str], opts: dict[str, str], problems: list[str]
) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.partition("=")[0]
        if name in values:
            name, value, i = _value(args, i)
            if value is None:
                problems.append(f"{name} has no value; left out")
            else:
                opts[values[name]] = value
        elif arg in flags:
            opts[flags[arg]] = "1"
            i += 1
        else:
            what = "unknown option" if arg.startswith("-") else "unexpected argument"
            problems.append(f"{what} {arg!r}; ignored")
            i += 1


def parse(args: list[str]) -> Invocation | None:
    """The hook invocation ``args`` stand for (never an error), or None when they run another command."""
    parts = split(args)
    if parts is None:
        return None
    before, after = parts
    opts: dict[str, str] = {}
    problems: list[str] = []
    if any(a in HELP for a in after):
        return Invocation(opts, problems, help=True)
    _options(before, GLOBAL_VALUES, GLOBAL_FLAGS, opts, problems)
    if after and not after[0].startswith("-"):
        host, after = after[0], after[1:]
        if host in HOSTS:
            opts["host"] = host
        else:
            problems.append(f"unknown host {host!r} (expected {' or '.join(HOSTS)}): nothing to do")
    else:
        problems.append(f"no host given (expected {' or '.join(HOSTS)}): nothing to do")
    _options(after, HOOK_VALUES, HOOK_FLAGS, opts, problems)
    if opts.get("log_level", "warning") not in LEVELS:
        problems.append(f"--log-level {opts.pop('log_level')!r} is not one of {', '.join(LEVELS)}; left out")
    wait = opts.get("nudge_wait", "0")
    if not (wait.isascii() and wait.isdigit() and int(wait) <= MAX_NUDGE_WAIT_MS):
        problems.append(f"--nudge-wait {opts.pop('nudge_wait')!r} is not 0 to {MAX_NUDGE_WAIT_MS} ms; left out")
    return Invocation(opts, problems)


def _help() -> None:
    """The hook's help, on stderr: a host reads stdout as the hook's answer."""
    import contextlib

    from .app import cli

    with contextlib.redirect_stdout(sys.stderr):
        try:
            cli.main(args=["hook", "--help"], prog_name="sessionwatch")
        except SystemExit:
            pass


def _run(inv: Invocation) -> None:
    if inv.help:
        _help()
        return
    from ..hooks import quick

    opts = inv.opts
    given = quick.stdin()
    if not inv.problems and (opts.get("gateway") or os.environ.get("SESSIONWATCH_GATEWAY")):
        from ..hooks import gateway_quick

        if gateway_quick.answer(opts, given.raw):
            return  # the gateway answered (hooks/gateway_quick.py): no HTTP client, no engine loaded
    plan = quick.Plan(quick.FULL) if inv.problems else quick.plan(opts, given.raw)
    verdict = plan.verdict
    if verdict in (quick.WRITES, quick.DELIVER) and ("foreground_nudge" in opts or not hasattr(os, "fork")):
        verdict = quick.FULL  # asked to finish its work before it exits, or no detached run to leave it to
    if verdict == quick.DELIVER:
        from ..hooks import quick_delivery

        done = quick_delivery.deliver(plan)  # printed as the full run would (hooks/quick_delivery.py)
        if done is None:
            verdict = quick.FULL
        else:
            line = done.logged(plan)
            if line is not None:
                quick.log(opts, *line)
            verdict = quick.WRITES if plan.writes or done.acknowledge else quick.QUIET
            opts = {**opts, "acknowledge": _ids(done.acknowledge)}
    if verdict == quick.QUIET:
        return  # the common run: nothing to deliver, settled before the engine loads (hooks/quick.py)
    from ..hooks import order

    # The session's writes in the order the host fired its events (hooks/order.py): the ticket is taken
    # here, before a fork, and the writes below wait for the runs that took one before.
    turn, event = _ticket(opts, given.raw)
    wait_s = order.FOREGROUND_WAIT_S
    if verdict == quick.WRITES and hasattr(os, "fork") and _detached():
        opts = {**opts, "no_deliver": "1"}  # in the detached child: write, never print (nobody reads it)
        wait_s = order.DETACHED_WAIT_S
    elif verdict == quick.WRITES and hasattr(os, "fork"):
        return  # the parent: the host has its (empty) answer now
    foreground = wait_s == order.FOREGROUND_WAIT_S
    detachable = foreground and _only_writes(opts, event) and "foreground_nudge" not in opts and hasattr(os, "fork")
    started_ms = int(time.time() * 1000)
    if turn is not None and not turn.wait_turn(wait_s) and detachable:
        # An event the host takes no answer from (a permission request, a session's end, a subagent's
        # start or stop) whose predecessor is still writing on a busy machine: the host has waited its
        # budget, so it gets its (empty) answer now, and a detached child keeps the order, up to the
        # detached wait in all. Written now instead, the predecessor's older report would be dropped as
        # late (a prompt's ``working`` lost behind the permission request that followed it).
        if not _detached(started_ms):
            return
        opts = {**opts, "no_deliver": "1"}
        turn.wait_turn(order.DETACHED_WAIT_S - wait_s)
    try:
        _full_run(inv, opts, given)
    finally:
        if turn is not None:
            turn.served()


def _ticket(opts: dict[str, str], raw: bytes) -> tuple[Ticket | None, object]:
    """The run's place in its host session's order of writes, or None (no session id to order by; an
    input too large to read twice for it: a tool's output, whose heartbeat may go out of turn); and the
    input's event name."""
    from ..hooks import order

    if len(raw) > ORDER_INPUT_BYTES:
        return None, None
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    return order.ticket(opts.get("host") or "", data.get("session_id")), data.get("hook_event_name")


def _only_writes(opts: dict[str, str], event: object) -> bool:
    """True when the host takes no answer from this run: its event is one the host's hook only reports
    (``HookAdapter.observes``), so the run can finish after the host has gone on."""
    from ..hosts import identity

    room = identity.ROOMS.get(opts.get("host") or "")
    return room is not None and isinstance(event, str) and event in room.hook.observes


def _full_run(inv: Invocation, opts: dict[str, str], given: Input) -> None:
    from ..hooks.run import NUDGE_RETRY_MS, log, main, setup_logging

    level = opts.get("log_level", "warning")
    setup_logging(opts.get("log_file"), "info" if level == "warning" else level)
    for problem in inv.problems:
        log.warning("hook command line: %s", problem)
    gateway = opts.get("gateway", os.environ.get("SESSIONWATCH_GATEWAY")) or None
    main(
        opts.get("host"),
        session=opts.get("session"),
        agent=opts.get("agent"),
        store=opts.get("store", os.environ.get("SESSIONWATCH_STORE")) or None,
        gateway=gateway,
        token=opts.get("token", os.environ.get("SESSIONWATCH_TOKEN")) or None,
        nudge="no_nudge" not in opts,
        nudge_retry_ms=int(opts["nudge_wait"]) if "nudge_wait" in opts else NUDGE_RETRY_MS,
        foreground_nudge="foreground_nudge" in opts,
        deliver="no_deliver" not in opts,
        acknowledge=_numbers(opts.get("acknowledge", "")),
        stdin=given,
    )


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i)


def _detached(started_ms: int | None = None) -> bool:
    """Fork: True in a child detached from the host (its own session, the null device for its streams,
    which the host waits on), False in the parent, which answers now. No fork possible: True (the run
    then writes in the foreground, which is only slower)."""
    from ..hooks.host_process import remember_host

    remember_host(started_ms)  # the host's pid and the hook's start, while the host is still this process's parent
    try:
        sys.stdout.flush()
        pid = os.fork()
    except OSError:
        return True
    if pid:
        return False
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    except OSError:
        pass
    return True


def _settle() -> None:
    """Flush stdout and stderr now; a stream the host already closed is pointed at the null device, so
    the interpreter's own flush at exit cannot turn the exit code into 120."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - the host is gone: nothing more to say to it
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
            except Exception:  # noqa: BLE001
                pass


def run_hook(args: list[str]) -> bool:
    """Run the hook when ``args`` are a hook invocation (and return True: the process then exits 0
    whatever happened); False (nothing done) otherwise."""
    inv = parse(args)
    if inv is None:
        return False
    try:
        _run(inv)
    except BaseException as exc:  # noqa: BLE001 - a hook never fails its host, not even on Ctrl-C or exit()
        try:
            import logging

            logging.getLogger("sessionwatch.hook").error(
                "the hook stopped early, nothing delivered: %s: %s", exc.__class__.__name__, exc
            )
        except BaseException:  # noqa: BLE001
            pass
    _settle()
    return True
