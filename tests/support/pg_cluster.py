"""A private PostgreSQL cluster for tests that crash the server (the shared one is never restarted).

``initdb`` and ``pg_ctl`` come from ``pg_config --bindir`` (or ``$PATH``). ``initdb`` refuses to run as
root, so when the tests run as root the cluster belongs to the ``postgres`` OS user and every server
command runs as that user (``runuser``). The server listens on a Unix socket in the cluster's own
folder only (no TCP port to collide with), and trusts local connections; the URL names that folder.

``crash()`` is ``pg_ctl restart -m immediate``: the postmaster and every backend stop at once, without a
checkpoint, and the server replays the WAL when it comes back, as after a power cut of the server
process (the machine's page cache survives, so what reached the kernel survives too).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

PORT = 5433  # only names the socket file inside the private folder; no TCP listener


def bindir() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when this machine has no PostgreSQL server binaries."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True)
        folder = Path(out.stdout.strip())
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    except (OSError, subprocess.SubprocessError):
        pass
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    return None


def unavailable_reason() -> str | None:
    """Why a private cluster cannot be made here (None: it can)."""
    if bindir() is None:
        return "no initdb/pg_ctl on this machine (pg_config --bindir, PATH)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' OS user to own the cluster (initdb refuses root)"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the cluster as 'postgres'"
    return None


class PrivateCluster:
    """One throwaway cluster: ``start()``, ``url(db)``, ``crash()``, ``stop()`` (also removes its files)."""

    def __init__(self) -> None:
        folder = bindir()
        if folder is None:
            raise RuntimeError(unavailable_reason() or "no PostgreSQL binaries")
        self._bin = folder
        self.root = Path(tempfile.mkdtemp(prefix="sw-pgcluster-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self._owner: pwd.struct_passwd | None = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self.sockets.mkdir()
        if self._owner is not None:
            os.chmod(self.root, 0o755)
            for p in (self.root, self.sockets):
                os.chown(p, self._owner.pw_uid, self._owner.pw_gid)
        self.crashes = 0

    def _cmd(self, *args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self._bin / args[0]), *args[1:]]
        if self._owner is not None:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check, cwd=self.root)

    def start(self) -> None:
        self._cmd("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        # In the configuration file, so every start (crash(), resume()) uses it: never a TCP listener that
        # could meet the shared server's port.
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.sockets}'",
            "port": str(PORT),
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": "200",
            "shared_buffers": "'32MB'",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("".join(f"\n{k} = {v}" for k, v in settings.items()) + "\n")
        self._cmd("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self._wait_ready()
        self.execute("postgres", "CREATE DATABASE sw")

    def url(self, database: str = "sw", **query: str) -> str:
        extra = "".join(f"&{k}={quote(v)}" for k, v in query.items())
        return f"postgresql://postgres@/{database}?host={quote(str(self.sockets))}&port={PORT}{extra}"

    def execute(self, database: str, sql: str) -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []

    def _wait_ready(self, timeout: float = 60.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def crash(self) -> None:
        """``pg_ctl restart -m immediate``: kill the server without a checkpoint, start it again (WAL replay)."""
        # -l again: without it the restarted server would write its log to our pipe and keep it open.
        self._cmd("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "immediate", "-w", "-t", "60", "restart")
        self.crashes += 1
        self._wait_ready()

    def halt(self, mode: str = "fast") -> None:
        """Stop the server (a fast shutdown, or ``immediate``: a crash), keeping its files: ``resume()``
        starts it again."""
        self._cmd("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return self._cmd("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def resume(self) -> None:
        self._cmd("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self._wait_ready()

    def stop(self) -> None:
        try:
            self._cmd("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop", check=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
