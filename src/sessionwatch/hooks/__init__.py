"""The hook command of every host room (Claude Code, Codex CLI, OpenCode's plugin, Pi's extension): deliver
pending notices as the next prompt's additional context, nudge the upstream monitor when a person types into a
watched worker, and write down what the host's events say (lifecycle, subagents).

``run.py`` is the hook command (kept light: it is on the person's prompt path), ``delivery.py`` the
at-least-once answer state; before it, with the standard library alone, ``quick.py`` settles a run with
nothing to do, ``quick_delivery.py`` prints the notices of a local SQLite store, ``gateway_quick.py`` has a
gateway answer, and ``down.py`` bounds and remembers a server that does not answer; ``hosts.py`` is each
room's hook adapter by name. What a host's install writes is its room's (``sessionwatch.hosts.<room>``);
``doctor.py`` adds the store or gateway check.
"""
