"""Host rooms: one package per agent CLI sessionwatch reaches (``opencode``, ``pi``; Claude Code and Codex
still live in ``upstream``, ``hooks`` and ``cli``).

A room owns what is particular to its host: where the host keeps its sessions and how to read them
(a person's turn, a missing session), the plugin or extension it loads, and the files ``install``
writes. A room sits below ``upstream``: it imports only the vocabulary and the store's records, and the
monitor, the hook command and ``install`` call into it, never the other way round.
"""
