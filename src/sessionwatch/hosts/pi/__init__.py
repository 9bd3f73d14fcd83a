"""Pi (npm ``@mariozechner/pi-coding-agent``): its session files and its extension.

- ``sessions``: where Pi keeps one JSONL file per session, listing and finding one by id or folder.
- ``reader``: a file read from a cursor; which new entries are a person's (the conservative rule that
  needs no extension).
- ``sessionwatch.ts`` (package data) and ``install``: the extension ``sessionwatch install pi`` writes,
  which delivers notices into the next model call, tells who sent each prompt, and reports the lifecycle.
"""

from .reader import Scan, baseline, scan
from .sessions import CATALOG, UPSTREAM_KIND, PiSessions

__all__ = ["CATALOG", "UPSTREAM_KIND", "PiSessions", "Scan", "baseline", "scan"]
