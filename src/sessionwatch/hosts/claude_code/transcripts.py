"""Where Claude Code keeps its transcripts: ``<root>/projects/<escaped-cwd>/<session-id>.jsonl`` (root =
``$CLAUDE_CONFIG_DIR`` or ``~/.claude``), and which of their rows are a person's (``rows.py``, ``stream.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..transcripts.files import TranscriptFiles, plain_id
from ..transcripts.rows import RowRules
from . import rows
from .stream import ClaudeReducer

RULES = RowRules("claude", rows.could_matter, rows.classify_claude, ClaudeReducer)


def thread_of(file_name: str) -> str | None:
    """The thread id a Claude transcript file name stands for, or None when the catalog does not offer it.

    The one rule for both listing and serving: sub-agent transcripts (``agent-*.jsonl``) belong to their
    parent session and are not threads of their own, so they are neither listed nor served by name.
    """
    if not file_name.endswith(".jsonl") or file_name.startswith("agent-"):
        return None
    tid = file_name[:-6]
    return tid if plain_id(tid) else None


class ClaudeTranscripts(TranscriptFiles):
    def candidates(self, base: Path, thread_id: str | None) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for project in os.scandir(base):
            if not project.is_dir():
                continue
            if thread_id is not None:
                if thread_of(thread_id + ".jsonl") != thread_id:
                    return []  # a name the listing never shows is not served either
                path = os.path.join(project.path, thread_id + ".jsonl")
                if os.path.lexists(path):
                    out.append((thread_id, path))
                continue
            for entry in os.scandir(project.path):
                tid = thread_of(entry.name)
                if tid is not None:
                    out.append((tid, entry.path))
        return out


FILES = ClaudeTranscripts(
    "claude", "claude-cli", RULES, root_env="CLAUDE_CONFIG_DIR", home_dir=".claude", folder="projects"
)
