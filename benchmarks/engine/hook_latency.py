"""Hook latency: what a host waits for on every prompt and tool call, measured beside ``python -c pass``.

A command hook is timed from process start to exit, Python start-up included (what a person waits for
before their prompt goes out). Every timed run has one run of ``python -c pass`` beside it (the floor),
so each case has its own floor measured in the same minute, and a busy machine slows both alike; the
ratios are the case's p50 over its floor's p50 and its p95 over its floor's p95.

Local store (``sessionwatch --store URL hook claude-code``), target p95 within ``RATIO_BUDGET`` (3×) the
floor: a manager with nothing pending; a manager with one notice to deliver every other run (the run
after it acknowledges it); an adopted worker's UserPromptSubmit (link lookup plus the detached nudge,
which the host does not wait for).

Through a gateway (``sessionwatch serve`` on the same store, started here): Claude Code's HTTP hook
(a POST to the gateway's hook route on a fresh connection, what Claude Code sends instead of starting a
process; target p95 at most ``HTTP_BUDGET_MS`` added per event), Codex's command hook through the
gateway (target p95 within ``GATEWAY_RATIO_BUDGET``, 4×, the floor), each with one notice every other
event; and a command hook run against a gateway remembered as down (target p95 at most
``DOWN_BUDGET_MS``). All cases run in one process, one after the other, in the same run.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUDGET_MS = 300.0
RATIO_BUDGET = 3.0  # local store: p95 within 3x the floor's
GATEWAY_RATIO_BUDGET = 4.0  # Codex's command hook through a gateway
HTTP_BUDGET_MS = 20.0  # Claude Code's HTTP hook: ms added per event
DOWN_BUDGET_MS = 50.0  # a run against a gateway remembered as down
REMEMBER_S = 30.0  # twin: hooks/down.py REMEMBER_S (a miss is remembered this long)


def _argv() -> list[str]:
    script = Path(sys.executable).with_name("sessionwatch")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "sessionwatch"]


def _stats(ms: list[float]) -> dict[str, Any]:
    a = sorted(ms)
    q = lambda p: round(a[min(len(a) - 1, int(p * len(a)))], 1)  # noqa: E731
    return {"runs": len(a), "p50_ms": q(0.5), "p95_ms": q(0.95), "max_ms": round(a[-1], 1)}


CPU: list[float] = []  # CPU time (user + system) of each timed process: what a busy machine does not inflate


def _cpu() -> float:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return 0.0
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


def _timed(cmd: list[str], payload: bytes, env: dict[str, str] | None = None) -> tuple[float, bytes]:
    cpu = _cpu()
    begun = time.perf_counter()
    out = subprocess.run(cmd, input=payload, capture_output=True, env=env, timeout=60)
    took = (time.perf_counter() - begun) * 1000
    CPU.append(_cpu() - cpu)
    if out.returncode != 0:
        raise SystemExit(f"hook exited {out.returncode}: {out.stderr.decode()[-400:]}")
    return took, out.stdout


def _cpu_stats(n: int) -> dict[str, Any]:
    a = sorted(CPU[-n:])
    return {"cpu_p50_ms": round(a[len(a) // 2], 1), "cpu_p95_ms": round(a[min(len(a) - 1, int(0.95 * len(a)))], 1)}


class Floors:
    """One ``python -c pass`` run beside each timed run, kept per case."""

    def __init__(self) -> None:
        self.by_case: dict[str, list[float]] = {}
        self.all: list[float] = []

    def run(self, case: str) -> None:
        took = _timed([sys.executable, "-c", "pass"], b"")[0]
        CPU.pop()  # the floor's CPU is not the case's
        self.by_case.setdefault(case, []).append(took)
        self.all.append(took)

    def compare(self, case: str, ms: list[float]) -> dict[str, Any]:
        """The case's figures beside its floor's: both percentiles and the two ratios."""
        mine, floor = _stats(ms), _stats(self.by_case[case])
        return {
            **mine,
            "floor_p50_ms": floor["p50_ms"],
            "floor_p95_ms": floor["p95_ms"],
            "ratio_to_floor_p50": round(mine["p50_ms"] / max(floor["p50_ms"], 0.1), 2),
            "ratio_to_floor_p95": round(mine["p95_ms"] / max(floor["p95_ms"], 0.1), 2),
        }


def _payload(sid: str, event: str = "UserPromptSubmit") -> bytes:
    body: dict[str, Any] = {
        "session_id": sid,
        "transcript_path": f"/tmp/{sid}.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": event,
    }
    if event == "UserPromptSubmit":
        body["prompt"] = "go on"
    else:
        body.update(tool_name="Bash", tool_input={"command": "ls"}, tool_response={"stdout": "a"})
    return json.dumps(body).encode()


def _process_cpu_ms(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_gateway(url: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``sessionwatch serve`` on the bench store (no monitor), once it answers its health check."""
    import urllib.request

    port = _free_port()
    gateway = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*_argv(), "serve", "--store", url, "--port", str(port), "--no-monitor"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "SESSIONWATCH_ACCESS_LOG": "0"},
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{gateway}/v1/health", timeout=1) as res:
                if res.status == 200:
                    return proc, gateway
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the gateway did not start: {log.read_text()[-2000:]}")


def _post(gateway: str, path: str, body: bytes) -> tuple[float, int, bytes]:
    """One POST on a fresh connection, as a host's HTTP hook makes it: (ms, status, body)."""
    import http.client

    host, _, port = gateway.removeprefix("http://").partition(":")
    begun = time.perf_counter()
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json", "Connection": "close"})
        res = conn.getresponse()
        data = res.read()
    finally:
        conn.close()
    return (time.perf_counter() - begun) * 1000, res.status, data


def hook_latency(url: str, args: dict[str, Any], emit: Callable[..., None]) -> None:
    import tempfile

    from sessionwatch import Gateway

    runs = int(args.get("runs", 40))
    manager, worker, remote = "agent:main:main", "agent:main:subagent:worker", "agent:main:gw"
    state = tempfile.mkdtemp(prefix="sw-bench-hook-")
    env = {**os.environ, "XDG_STATE_HOME": state}
    for name in ("SESSIONWATCH_SESSION", "SESSIONWATCH_GATEWAY", "SESSIONWATCH_TOKEN", "SESSIONWATCH_HOOK_BUDGET"):
        env.pop(name, None)
    floors = Floors()
    results: dict[str, dict[str, Any]] = {}
    gw = Gateway.open(url, timers=False)
    server: subprocess.Popen[bytes] | None = None
    try:
        gw.put_session(manager)
        gw.put_session(worker, spawned_by=manager)
        gw.put_session(remote)
        gw.watch(manager, worker)
        # an adopted worker thread: a real (small) Claude transcript linked to the worker session
        root = Path(state) / "claude"
        tid = str(uuid.uuid4())
        folder = root / "projects" / "-bench"
        folder.mkdir(parents=True)
        (folder / f"{tid}.jsonl").write_text(
            json.dumps(
                {"type": "assistant", "uuid": "a1", "sessionId": tid, "message": {"role": "assistant", "content": "ok"}}
            )
            + "\n"
        )
        gw.upstream.configure(claude_root=root)
        gw.continue_thread("claude", tid, session_key=worker)
        local = [*_argv(), "--store", url, "hook", "claude-code"]

        def command_case(case: str, cmd: list[str], payload: Callable[[int], bytes], notices: str | None) -> int:
            """Time ``runs`` runs of ``cmd`` (a notice for ``notices`` before every other one), each beside
            a floor run; returns how many printed an answer."""
            ms: list[float] = []
            delivered = 0
            for i in range(runs):
                if notices and i % 2 == 0:
                    gw.enqueue_system_event(notices, f"bench notice {i}")
                floors.run(case)
                took, out = _timed(cmd, payload(i), env)
                ms.append(took)
                delivered += bool(out)
            results[case] = {**floors.compare(case, ms), **_cpu_stats(runs)}
            return delivered

        def fresh(event: str = "UserPromptSubmit") -> Callable[[int], bytes]:
            return lambda _i: _payload(str(uuid.uuid4()), event)

        def local_line(case: str, **extra: Any) -> None:
            within = results[case]["ratio_to_floor_p95"] <= RATIO_BUDGET
            emit(
                "hook-latency",
                case=case,
                mode="local",
                budget_ms=BUDGET_MS,
                target="p95 ≤ 3× floor",
                within=within,
                **extra,
                **results[case],
            )

        quiet = "manager, nothing pending"
        command_case(quiet, [*local, "--session", manager, "--no-nudge"], fresh(), None)
        local_line(quiet)
        one = "manager, one notice every other run"
        delivered = command_case(one, [*local, "--session", manager, "--no-nudge"], fresh(), manager)
        local_line(one, delivered=delivered)
        adopted = "adopted worker (link lookup + detached nudge)"
        command_case(adopted, [*local, "--nudge-wait", "0"], lambda _i: _payload(tid), None)
        local_line(adopted)

        # -- through a gateway on the same store ----------------------------------------------------------
        server, gateway = _start_gateway(url, env, Path(state) / "gateway.log")
        http = "Claude Code HTTP hook, one notice every other event"
        ms: list[float] = []
        given = 0
        served = _process_cpu_ms(server.pid)
        for i in range(runs):
            if i % 2 == 0:
                gw.enqueue_system_event(remote, f"bench notice {i}")
            floors.run(http)
            took, status, body = _post(gateway, f"/v1/sessions/{remote}/hooks/claude-code", fresh("PostToolUse")(i))
            if status != 200:
                raise SystemExit(f"the gateway's hook route answered {status}: {body[:300]!r}")
            ms.append(took)
            given += b"additionalContext" in body
        results[http] = floors.compare(http, ms)
        if served is not None and (after := _process_cpu_ms(server.pid)) is not None:
            # the gateway's own CPU per event: what other work on the machine does not inflate
            results[http]["server_cpu_ms_per_event"] = round((after - served) / runs, 2)
        emit(
            "hook-latency",
            case=http,
            mode="gateway",
            target=f"p95 ≤ {HTTP_BUDGET_MS:g} ms added",
            within=results[http]["p95_ms"] <= HTTP_BUDGET_MS,
            delivered=given,
            **results[http],
        )

        codex = "Codex command hook through the gateway, one notice every other run"
        cmd = [*_argv(), "--gateway", gateway, "hook", "codex", "--session", remote]
        delivered = command_case(codex, cmd, fresh("PostToolUse"), remote)
        emit(
            "hook-latency",
            case=codex,
            mode="gateway",
            target=f"p95 ≤ {GATEWAY_RATIO_BUDGET:g}× floor",
            within=results[codex]["ratio_to_floor_p95"] <= GATEWAY_RATIO_BUDGET,
            delivered=delivered,
            **results[codex],
        )

        down = "a gateway remembered as down"
        nowhere = f"http://127.0.0.1:{_free_port()}"  # nothing listens there: refused, then remembered
        cmd = [*_argv(), "--gateway", nowhere, "hook", "codex", "--session", remote]
        missed_at = 0.0
        ms = []
        for i in range(runs):
            if time.monotonic() - missed_at > REMEMBER_S - 5:  # (again) a miss that is remembered: not timed
                _timed(cmd, fresh("PostToolUse")(i), env)
                CPU.pop()
                missed_at = time.monotonic()
            floors.run(down)
            ms.append(_timed(cmd, fresh("PostToolUse")(i), env)[0])
        results[down] = {**floors.compare(down, ms), **_cpu_stats(runs)}
        emit(
            "hook-latency",
            case=down,
            mode="gateway",
            target=f"p95 ≤ {DOWN_BUDGET_MS:g} ms",
            within=results[down]["p95_ms"] <= DOWN_BUDGET_MS,
            **results[down],
        )

        emit("hook-floor", case="python -c pass, interleaved (all cases)", **_stats(floors.all))
        # wall time on a busy machine includes waiting for a core; the load average says how busy it was
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        emit(
            "hook-latency-budget",
            budget_ms=BUDGET_MS,
            worst_p95_ms=max(results[c]["p95_ms"] for c in (quiet, one, adopted)),
            ratio_budget=RATIO_BUDGET,
            ratios_to_floor_p95={c: r["ratio_to_floor_p95"] for c, r in results.items()},
            ratios_to_floor_p50={c: r["ratio_to_floor_p50"] for c, r in results.items()},
            within={
                "local, p95 ≤ 3× floor": all(
                    results[c]["ratio_to_floor_p95"] <= RATIO_BUDGET for c in (quiet, one, adopted)
                ),
                "HTTP hook, p95 ≤ 20 ms": results[http]["p95_ms"] <= HTTP_BUDGET_MS,
                "Codex through the gateway, p95 ≤ 4× floor": results[codex]["ratio_to_floor_p95"]
                <= GATEWAY_RATIO_BUDGET,
                "remembered as down, p95 ≤ 50 ms": results[down]["p95_ms"] <= DOWN_BUDGET_MS,
            },
            load_average=load,
            cores=os.cpu_count(),
        )
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
        gw.close()
