"""Host rooms: one package per agent CLI sessionwatch reaches (``claude_code``, ``codex``, ``opencode``, ``pi``),
each behind one small interface (``base.Room``) and listed in one registry (``registry.ROOMS``).

A room owns what is particular to its host: where the host keeps its sessions and how to read them (a
person's turn, a missing session), its hook adapter (the events answered and observed, the answer's shape),
the plugin or extension it loads, and the files ``install`` writes and ``doctor`` checks. A room sits below
``upstream``: it imports only the vocabulary, the store's records and what the rooms share here
(``transcripts/``, ``readers.py``, ``installer.py``, ``checks.py``, ...); the monitor, the hook command and
``install`` call into it through the registry, never the other way round. Adding a host is adding a room.

This package's ``__init__`` stays empty: the hook's quick path imports the registry first.
"""
