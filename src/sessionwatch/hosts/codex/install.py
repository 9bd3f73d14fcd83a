"""``sessionwatch install|uninstall|doctor codex``: the hooks, the MCP server and the hooks' trust in Codex's own
files, merged with what is there (the kit: ``hosts/installer.py``; the checks: ``hosts/checks.py``).

Where (verified against the pinned real binary, see docs/hooks-codex.md):

=============  ===================================  =========================================
scope          hooks                                MCP server
=============  ===================================  =========================================
``--project``  ``<dir>/.codex/hooks.json``          ``<dir>/.codex/config.toml``
``--user``     ``~/.codex/hooks.json``              ``~/.codex/config.toml``
=============  ===================================  =========================================

(``$CODEX_HOME`` replaces ``~/.codex``.) Codex hook trust lives in the user's ``config.toml`` and is
written by Codex itself (see ``trust.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import install_state as snapshots
from ..checks import Check, FileInstaller, Found, read_config
from ..installer import (
    SERVER_NAME,
    Change,
    Edit,
    JsonFormat,
    Skip,
    Target,
    TomlFormat,
    add_hooks,
    fix_command,
    install_file,
    is_our_hook,
    is_our_server,
    revert_file,
    strip_hooks,
)
from ..jsonrpc import RpcError
from .room import HOOK, PROGRAM

# what Codex passes its MCP server from the environment it runs in (it passes almost nothing by default):
# these decide which store or gateway the server uses and how it authenticates (an unset one is simply
# absent); CODEX_HOME: where the TUI's daemon listens, for the push (push.py)
CODEX_ENV_VARS = ["SESSIONWATCH_TOKEN", "SESSIONWATCH_STORE", "SESSIONWATCH_GATEWAY", "XDG_STATE_HOME", "CODEX_HOME"]
# What Codex hands an MCP server besides its env_vars (certificate variables too)
CODEX_BASE_ENV = ("HOME", "PATH", "LANG", "SHELL", "TERM", "USER", "LOGNAME", "SSL_CERT_FILE", "SSL_CERT_DIR")


def codex_dir() -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env else Path.home() / ".codex"


@dataclass
class CodexTarget(Target):
    adapter = HOOK
    no_local = "Codex has no per-person project file: use --project (.codex/, committed) or --user (~/.codex)"

    @property
    def hooks_path(self) -> Path:
        return (codex_dir() if self.scope == "user" else self.dir / ".codex") / "hooks.json"

    @property
    def mcp_path(self) -> Path:
        return (codex_dir() if self.scope == "user" else self.dir / ".codex") / "config.toml"

    def server(self) -> dict[str, Any] | None:
        """The MCP server entry, with or without --session: without, the server learns each session from
        Codex's calls (``_meta``) and what the session's hooks register (``push.py``)."""
        argv = self.server_argv()
        return {
            "command": argv[0],
            "args": argv[1:],
            "env_vars": list(CODEX_ENV_VARS),
            # the server knows Codex started it: it learns its session late and pushes through the TUI's daemon
            "env": {"SESSIONWATCH_HOST_CLI": "codex"},
            "required": True,  # Codex waits for it (otherwise a slow start misses the first request)
        }

    def install(self, *, trust: bool = True) -> list[Change]:
        changes = [
            install_file(self, self.hooks_path, JsonFormat, *_codex_hooks(self)),
            install_file(self, self.mcp_path, TomlFormat, *_codex_mcp(self)),
        ]
        if trust:
            changes.append(_trust(self))
        else:
            changes.append(Change(str(codex_user_config()), "skipped", note="--no-trust. " + trust_step(self)))
        return changes

    def uninstall(self) -> list[Change]:
        folders: list[str] = []  # created by install: removed at the end, when all their files are gone
        changes = [
            revert_file(self, self.hooks_path, JsonFormat, _codex_hooks(self)[1], folders),
            revert_file(self, self.mcp_path, TomlFormat, _codex_mcp(self)[1], folders),
        ]
        untrust = _untrust(self, folders)
        if untrust is not None:
            changes.append(untrust)
        snapshots.remove_folders(folders)
        return changes

    # -- doctor --
    def read_server(self) -> tuple[Any, Check | None]:
        mcp, problem = read_config(self.mcp_path, TomlFormat)
        tables = mcp.get("mcp_servers") if mcp is not None else None
        entry = tables.get(SERVER_NAME) if tables is not None else None
        return (entry.unwrap() if entry is not None and hasattr(entry, "unwrap") else entry), problem

    def command_checks(self, found: Found) -> list[Check]:
        return [_check_trust(self, found)]

    def server_checks(self, server: dict[str, Any]) -> list[Check]:
        out: list[Check] = []
        fix = fix_command(self)
        if server.get("required") is not True:
            out.append(
                Check(
                    "mcp",
                    False,
                    "Codex does not wait for the server (no required = true): a slow start misses the first request",
                    fix,
                )
            )
        env_vars = server.get("env_vars") or []
        if "SESSIONWATCH_TOKEN" not in env_vars:
            out.append(Check("mcp", False, "the server does not get SESSIONWATCH_TOKEN (env_vars)", fix))
        return out

    def sample_payload(self, event: str) -> dict[str, Any]:
        return {**super().sample_payload(event), "model": "verify"}

    def mcp_env(self, server: dict[str, Any]) -> dict[str, str]:
        """What Codex gives the server: a few variables, its ``env_vars`` and its ``env`` table."""
        names = [*CODEX_BASE_ENV, *[v for v in server.get("env_vars") or [] if isinstance(v, str)]]
        fixed = server.get("env")
        table = {str(k): str(v) for k, v in fixed.items()} if isinstance(fixed, dict) else {}
        return {**{k: os.environ[k] for k in names if k in os.environ}, **table}


def _codex_hooks(t: CodexTarget) -> tuple[Edit, Edit]:
    return (lambda data, snap: add_hooks(t, data, t.hooks_path)), (lambda data, snap: strip_hooks(t, data))


def _codex_mcp(t: CodexTarget) -> tuple[Edit, Edit]:
    def add(doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
        import tomlkit

        server = t.server()
        assert server is not None
        servers = doc.get("mcp_servers")
        current = servers.get(SERVER_NAME) if servers is not None else None
        plain = current.unwrap() if current is not None and hasattr(current, "unwrap") else current
        if plain is not None and not is_our_server(plain):
            raise Skip(f"an MCP server named {SERVER_NAME!r} that sessionwatch did not write is there: left as it is")
        if isinstance(plain, dict) and {k: plain.get(k) for k in server} == server:
            return []
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        table = tomlkit.table()
        for k, v in server.items():
            table[k] = v
        servers[SERVER_NAME] = table
        return [f"mcp server {SERVER_NAME}" + (" (updated)" if plain is not None else "")]

    def strip(doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
        what = _strip_trust(t, doc, snap) if t.scope == "user" else []
        servers = doc.get("mcp_servers")
        current = servers.get(SERVER_NAME) if servers is not None else None
        plain = current.unwrap() if current is not None and hasattr(current, "unwrap") else current
        if not is_our_server(plain):
            return what
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
        return [*what, f"mcp server {SERVER_NAME}"]

    return add, strip


# -- Codex hook trust (in the user's config.toml, written by Codex) ---------------------------------------
def _strip_trust(t: CodexTarget, doc: Any, snap: snapshots.Snapshot | None) -> list[str]:
    """Take out the trust entries this install had Codex write: our hooks' ``hooks.state`` keys (as
    recorded, and only while they still hold the hash recorded) and a project trust it added."""
    if snap is None:
        return []
    what: list[str] = []
    recorded: dict[str, str] = snap.extra.get("trust", {}).pop(t.owner, {})
    hooks: Any = doc.get("hooks")
    states: Any = hooks.get("state") if hooks is not None and hasattr(hooks, "get") else None
    for key, value in recorded.items():
        entry = states.get(key) if states is not None else None
        if entry is not None and entry.get("trusted_hash") == value:
            del states[key]
            what.append(f"trust {key.rsplit(':', 3)[1]}")
    if states is not None and not states:
        del hooks["state"]
        if not hooks:
            del doc["hooks"]
    trusted_projects: list[str] = snap.extra.get("projects", [])
    if t.owner in trusted_projects:
        trusted_projects.remove(t.owner)
        projects = doc.get("projects")
        entry = projects.get(str(t.dir)) if projects is not None else None
        if entry is not None and entry.unwrap() == {"trust_level": "trusted"}:
            del projects[str(t.dir)]
            what.append(f"project trust {t.dir}")
            if not projects:
                del doc["projects"]
    return what


def _trust(t: CodexTarget) -> Change:
    """Have Codex trust our hooks (``codex app-server``), recording what it wrote for uninstall."""
    from .trust import TrustError, codex_path, trust

    config = codex_user_config()
    codex = codex_path()
    if codex is None:
        return Change(
            str(config), "skipped", note="codex is not on PATH, so the hooks are not trusted yet. " + trust_step(t)
        )
    raw = snapshots.read_bytes(config)
    snap = snapshots.begin(config, raw, ours_already=False)
    try:
        report = trust(codex, t.dir, t.hooks_path, lambda c: is_our_hook(c, "codex"), project=t.scope == "project")
    except TrustError as exc:
        return Change(str(config), "failed", note=f"{exc}. {trust_step(t)}")
    if not report.trusted_now and not report.project_trusted_now:
        return Change(str(config), "unchanged", note=f"hooks already trusted (checked in {report.elapsed_ms:.0f} ms)")
    after = snapshots.read_bytes(config)
    if raw is None:
        snap.dirs = []
    trusted = snap.extra.setdefault("trust", {}).setdefault(t.owner, {})
    for h in report.ours:
        if h["key"] in report.trusted_now:
            trusted[h["key"]] = h["currentHash"]
    if report.project_trusted_now:
        snap.extra.setdefault("projects", []).append(t.owner)
    if t.owner not in snap.extra.setdefault("owners", []):
        snap.extra["owners"].append(t.owner)
    snapshots.save(snap, after)
    what = [f"trust {h['eventName']}" for h in report.ours if h["key"] in report.trusted_now]
    if report.project_trusted_now:
        what.insert(0, f"project trust {t.dir}")
    return Change(
        str(config),
        "trusted",
        what,
        note=f"through codex app-server, as the /hooks review does ({report.elapsed_ms:.0f} ms)",
    )


def _untrust(t: CodexTarget, folders: list[str]) -> Change | None:
    config = codex_user_config()
    if config == t.mcp_path:  # --user: the MCP step reverted the same file, trust included
        return None
    return revert_file(t, config, TomlFormat, lambda doc, snap: _strip_trust(t, doc, snap), folders)


def codex_user_config() -> Path:
    return codex_dir() / "config.toml"


def trust_step(t: CodexTarget) -> str:
    """What a person does to trust the hooks by hand."""
    if t.scope == "project":
        start = f"run `codex` in {t.dir}, trust the folder when asked, then open /hooks"
    else:
        start = "run `codex`, open /hooks"
    events = t.events()  # the hooks install writes (add_hooks): each one is trusted on its own
    return (
        f"Codex skips these hooks until they are trusted: {start} and trust the {len(events)} sessionwatch hooks "
        f"({', '.join(events)}); or, with codex on PATH, run `{fix_command(t)}`."
    )


def _check_trust(t: CodexTarget, found: Found) -> Check:
    from .trust import codex_path, status

    codex = codex_path()
    if codex is None:
        return Check("trusted", None, "cannot check: codex is not on PATH", trust_step(t))
    try:
        ours = status(codex, t.dir, t.hooks_path, lambda c: is_our_hook(c, "codex"))
    except RpcError as exc:
        return Check("trusted", None, f"cannot check: {exc}", trust_step(t))
    if not ours:
        if t.scope == "project":
            return Check(
                "trusted",
                False,
                f"Codex reads nothing of {t.dir / '.codex'}: the project is not trusted",
                fix_command(t),
            )
        return Check(
            "trusted",
            False,
            "Codex does not list the hooks (hooks turned off in config.toml?)",
            "remove `[features] hooks = false`",
        )
    bad = [
        f"{h.get('eventName')}: {h.get('trustStatus')}"
        for h in ours
        if h.get("trustStatus") not in ("trusted", "managed")
    ]
    if bad:
        return Check("trusted", False, f"Codex skips them without a word ({', '.join(bad)})", fix_command(t))
    return Check("trusted", True, f"Codex trusts all {len(ours)} ({codex_user_config()})")


INSTALLER = FileInstaller(CodexTarget, PROGRAM)
