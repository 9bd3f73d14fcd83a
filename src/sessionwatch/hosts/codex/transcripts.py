"""Where Codex CLI keeps its rollouts: ``<root>/sessions/YYYY/MM/DD/rollout-<timestamp>-<thread-id>.jsonl``
(root = ``$CODEX_HOME`` or ``~/.codex``), and which of their rows are a person's (``rows.py``, ``stream.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..transcripts.files import TranscriptFiles
from ..transcripts.rows import RowRules
from . import rows
from .stream import CodexReducer

RULES = RowRules("codex", rows.could_matter, rows.classify_codex, CodexReducer, rows.CodexThread)
ROLLOUT_NAME = re.compile(
    r"rollout-.*-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl"
)


class CodexRollouts(TranscriptFiles):
    def candidates(self, base: Path, thread_id: str | None) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        pattern = f"*/*/*/rollout-*-{thread_id}.jsonl" if thread_id else "*/*/*/rollout-*.jsonl"
        for rollout in base.glob(pattern):
            m = ROLLOUT_NAME.fullmatch(rollout.name)
            if m and (thread_id is None or m.group(1) == thread_id):
                out.append((m.group(1), str(rollout)))
        return out


FILES = CodexRollouts("codex", "codex-cli", RULES, root_env="CODEX_HOME", home_dir=".codex", folder="sessions")
