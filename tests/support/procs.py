"""Subprocess helpers shared by the tests that start real servers."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen, timeout: float = 10.0, sig: int = signal.SIGTERM) -> int:
    """Ask a process to stop (SIGTERM by default); kill it if it has not exited within ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(5)
