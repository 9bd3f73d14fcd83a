"""``sessionwatch demo``: the manager / child / person scenario, end to end against a real gateway."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ..errors import StoreUnavailable
from ..notices import notice_text
from .app import State, cli, command, pass_state
from .output import console, print_json

NOTICE_SINCE = re.compile(r'session_status sessionKey "(?P<key>[^"]+)" changesSince (?P<since>\d+)\.$')


class DemoFailed(Exception):
    """An expectation of the scenario did not hold."""


@contextlib.contextmanager
def local_gateway(startup_timeout: float = 30.0) -> Iterator[tuple[str, str]]:
    """Start ``python -m sessionwatch.http`` on a free port with a throwaway SQLite store and its own token."""
    from ..client import GatewayClient

    with tempfile.TemporaryDirectory(prefix="sessionwatch-demo-") as tmp:
        # The gateway inherits the bound socket (--fd): no window in which another process takes the port.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        url = f"http://127.0.0.1:{port}"
        token = secrets.token_urlsafe(24)  # may start with "-": passed as --token=... below
        log_path = Path(tmp) / "gateway.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sessionwatch.http",
                    "--fd",
                    str(listener.fileno()),
                    "--store",
                    f"sqlite:///{tmp}/demo.db",
                    f"--token={token}",
                    "--no-monitor",
                    "--no-access-log",
                    "--log-level",
                    "warning",
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                pass_fds=(listener.fileno(),),
            )
            listener.close()  # the gateway holds it now
            try:
                probe = GatewayClient(url, token=token, timeout=2.0)
                deadline = time.monotonic() + startup_timeout
                while True:
                    if proc.poll() is not None:
                        raise StoreUnavailable(
                            "the demo gateway exited early:\n" + log_path.read_text(errors="replace")[-2000:]
                        )
                    try:
                        if probe.health().get("status") == "ok":
                            break
                    except Exception:  # noqa: BLE001 - not listening yet
                        pass
                    if time.monotonic() > deadline:
                        raise StoreUnavailable("the demo gateway did not become healthy in time")
                    time.sleep(0.1)
                probe.close()
                yield url, token
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class Narrator:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.steps: list[dict[str, Any]] = []
        self.console = console()

    def step(self, title: str, detail: str = "", **data: Any) -> None:
        self.steps.append({"step": len(self.steps) + 1, "title": title, **data})
        if not self.as_json:
            self.console.print(f"[bold cyan]{len(self.steps)}.[/] [bold]{title}[/]")
            if detail:
                self.console.print(detail, markup=False, highlight=False)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise DemoFailed(message)


def run_scenario(client: Any, say: Narrator, created: list[str] | None = None) -> None:
    """The scenario itself, against anything with the gateway methods (client or engine). The keys of
    the sessions it makes are appended to ``created`` as they come to exist (for the clean-up)."""
    agent = f"demo{uuid.uuid4().hex[:6]}"
    manager = f"agent:{agent}:main"
    child = f"agent:{agent}:subagent:researcher"
    made = created if created is not None else []

    client.put_session(manager)
    made.append(manager)
    say.step("The manager session exists", f"manager = {manager}", manager=manager)

    spawned = client.call_tool(
        "sessions_spawn", {"label": "researcher", "task": "Summarize Q3 churn by region."}, caller=manager
    )
    _check("error" not in spawned, f"sessions_spawn failed: {spawned}")
    made.insert(0, child)  # the child goes first: deleting the manager first would leave it orphaned
    seeded = int(spawned["stateVersion"])
    say.step(
        "The manager spawns a child and watches it from its spawn version",
        f"{spawned['text']}\nThe manager's cursor on the child starts at {seeded}.",
        child=child,
        stateVersion=seeded,
    )

    typed = client.inbound(child, "Actually, use the Q4 numbers.", channel="webchat", human_id="dana")
    _check(bool(typed.get("recorded")), f"the person's turn was not recorded: {typed}")
    say.step(
        "A person types straight into the child",
        f"recorded human_direct_message #{typed['event']['sequence']} (actor human:dana)",
        sequence=typed["event"]["sequence"],
    )

    pending = client.peek_system_events(manager)
    _check(len(pending) == 1, f"expected exactly one pending notice for the manager, found {len(pending)}")
    expected = notice_text(child, seeded)
    _check(pending[0]["text"] == expected, f"notice text differs:\n{pending[0]['text']}\n!=\n{expected}")
    say.step(
        "The manager has exactly one notice waiting (its own spawn raised none)",
        pending[0]["line"],
        notice=pending[0]["text"],
    )

    drained = client.drain_system_events(manager)
    _check(len(drained) == 1, f"drain returned {len(drained)} entries")
    match = NOTICE_SINCE.search(drained[0]["text"])
    _check(match is not None and match["key"] == child, "the notice does not name the child and a version")
    assert match is not None
    since = int(match["since"])
    say.step(
        "On its next turn the manager consumes it (the drain is the acknowledgment)",
        f"changesSince = {since}",
        changesSince=since,
    )

    status = client.call_tool("session_status", {"sessionKey": child, "changesSince": since}, caller=manager)
    _check("error" not in status, f"session_status failed: {status}")
    events = status["stateChanges"]["events"]
    kinds = [e["kind"] for e in events]
    _check(kinds == ["human_direct_message"], f"unexpected changes: {kinds}")
    say.step(
        "It reconciles with session_status changesSince: the exact typed delta",
        "\n".join(f"  #{e['sequence']} {e['kind']} by {e['actorType']}: {e['summary']}" for e in events),
        events=events,
    )

    sent = client.call_tool(
        "sessions_send",
        {"sessionKey": child, "message": "Understood: Q4 numbers. Carry on.", "watch": True},
        caller=manager,
    )
    _check(sent.get("status") == "accepted", f"sessions_send failed: {sent}")
    after = client.peek_system_events(manager)
    _check(after == [], f"the manager's own message must not raise a notice, found {after}")
    say.step("It acts: a message to the child (its own turn raises no notice)", sent["text"], send=sent)

    burst = [
        client.inbound(child, text, channel="webchat", human_id="dana")
        for text in ("One more thing:", "cite your sources.", "Thanks!")
    ]
    _check(all(b.get("recorded") for b in burst), f"the burst was not recorded: {burst}")
    waiting = client.peek_system_events(manager)
    head = burst[-1]["event"]["sequence"]
    reconciled = int(status["stateVersion"])  # what the manager has seen since its reconciliation
    _check(
        len(waiting) == 1 and waiting[0]["text"] == notice_text(child, reconciled),
        f"a burst must give exactly one notice, found {waiting}",
    )
    say.step(
        "A burst of three more turns still gives exactly one notice (coalesced)",
        f"{waiting[0]['line']}\n(the child is at stateVersion {head}; the manager will reconcile from "
        f"{reconciled} on its next turn)",
        notice=waiting[0]["text"],
        stateVersion=head,
    )


def _clean_up(client: Any, created: list[str], deleted: list[str], say: Narrator) -> None:
    """Delete what the demo made on someone's gateway; a failure is said, never raised over the result."""
    for key in created:
        try:
            client.delete_session(key)
            deleted.append(key)
        except Exception as exc:  # noqa: BLE001 - the demo's outcome stands; say what is left behind
            print(f"note: could not delete the demo session {key}: {exc}", file=sys.stderr)
    if deleted and not say.as_json:
        say.console.print(f"Cleaned up: deleted the demo's {len(deleted)} sessions.", markup=False)


@command(cli, "demo")
@click.option("--keep", is_flag=True, help="On a given --gateway, keep the demo's sessions (default: deleted).")
@pass_state
def demo_cmd(state: State, keep: bool) -> None:
    """Run the manager / child / person scenario end to end and narrate it.

    Starts a real gateway (python -m sessionwatch.http) on a free port with a
    throwaway store, unless the global --gateway URL is given. The manager spawns
    a child, a person types into the child twice, the manager sees exactly one
    notice, reconciles with changesSince and acts. Exits 0 when every step held.
    On a given gateway the demo deletes the two sessions it made when it ends
    (--keep leaves them, to look at in the dashboard).

    \b
    Examples:
      sessionwatch demo
      sessionwatch --gateway http://127.0.0.1:7878 demo
      sessionwatch --gateway http://127.0.0.1:7878 --token $T demo --json --keep
    """
    from ..client import GatewayClient

    say = Narrator(state.json)
    created: list[str] = []
    deleted: list[str] = []
    with contextlib.ExitStack() as stack:
        url, token = (state.gateway, state.token) if state.gateway else stack.enter_context(local_gateway())
        client = GatewayClient(url, token=token)
        stack.callback(client.close)
        if state.gateway and not keep:
            stack.callback(_clean_up, client, created, deleted, say)
        say.step("Gateway ready", url, gateway=url, started=state.gateway is None)
        failed: DemoFailed | None = None
        try:
            run_scenario(client, say, created)
        except DemoFailed as exc:
            failed = exc
    if failed is not None:  # said after the clean-up, so --json can list what it deleted
        if state.json:
            print_json({"ok": False, "error": str(failed), "steps": say.steps, "deleted": deleted})
        else:
            console().print(f"[bold red]demo failed:[/] {failed}")
        raise click.exceptions.Exit(1) from failed
    if state.json:
        print_json({"ok": True, "steps": say.steps, "deleted": deleted})
    else:
        say.console.print("[bold green]Done:[/] one intervention, one notice, an exact delta, then action.")
