"""Hooks for the agent CLIs people run (Claude Code, Codex CLI): deliver pending notices as the next
prompt's additional context, nudge the upstream monitor when a person types into a watched worker, and
install/uninstall the hooks and the MCP server into the hosts' own config files.

``run.py`` is the hook command (kept light: it is on the person's prompt path), ``delivery.py`` the
at-least-once answer state, ``hosts.py`` the two hosts' formats, ``install.py`` the config merging.
"""
