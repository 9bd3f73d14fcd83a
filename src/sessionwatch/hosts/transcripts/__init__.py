"""Reading JSONL transcripts, shared by the rooms whose hosts write them (Claude Code, Codex): the verdict on
a row (``verdict.py``), text normalization and digests (``normalize.py``), the rules every host shares
(``rules.py``: inter-session deliveries, reseed wrappers), the streaming parser for oversized rows
(``jsonstream.py``, ``reducing.py``), how a room's row rules are applied (``rows.py``) and where a room's files
are (``files.py``). Each room's own rules are in its ``rows.py`` and ``stream.py``.
"""

from .files import TranscriptFiles

__all__ = ["TranscriptFiles"]
