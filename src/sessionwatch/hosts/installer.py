"""The installer kit every room that is configured through files uses (Claude Code, Codex, Pi; OpenCode for
the checks): the install :class:`Target` (host, scope, folder, session, agent, global options; each room
subclasses it with its own files), the file formats, and installing into / reverting one file with the snapshot
``install_state`` keeps. The :class:`Installer` interface ``sessionwatch install|uninstall|doctor HOST`` calls and
what one file change is (:class:`Change`) are in ``install_api.py``.

The project scope's files are meant to be committed, so they hold no path of this machine: the command is
``sessionwatch``, found on the host's ``PATH``. The per-person files (``--local``, ``--user``) name this
installation's absolute path. What is ours is recognised by its command: a hook handler running
``sessionwatch ... hook <host>``, an MCP server named ``sessionwatch`` running ``sessionwatch ... mcp``.
Installing adds or updates exactly those (other hooks and servers are never touched; a ``sessionwatch``
server someone else wrote is left alone) and changes nothing when all is in place. What each file held
before is kept in the state folder (``install_state``); uninstall gives it back byte for byte while the file
is as install left it, and otherwise takes out exactly our entries.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import quote

from ..errors import InvalidArgument
from ..keys import parse_key
from . import install_state as snapshots
from .agent_names import agent_from_folder
from .install_api import Change as Change, Installation as Installation, Installer as Installer

if TYPE_CHECKING:
    from .base import HookAdapter
    from .install_api import Check, Found

SERVER_NAME = "sessionwatch"
HOOK_TIMEOUT_S = 10  # the host's limit for one run; ours answers in well under a second
SCOPES = ("project", "local", "user")


def sessionwatch_argv() -> list[str]:
    """How a host should start this very installation: the console script beside the interpreter, else
    ``python -m sessionwatch``; absolute, so the host's PATH does not matter."""
    script = Path(sys.executable).with_name("sessionwatch")
    if script.is_file():
        return [str(script)]
    found = shutil.which("sessionwatch")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "sessionwatch"]


def _is_sessionwatch(tokens: list[str]) -> bool:
    for i, tok in enumerate(tokens):
        if os.path.basename(tok) == "sessionwatch":
            return True
        if tok == "-m" and i + 1 < len(tokens) and tokens[i + 1] == "sessionwatch":
            return True
    return False


HTTP_HOOK_PATH = "/hooks/"  # .../v1/sessions/{key}/hooks/{host}: the gateway's hook route
OWN_HOOK_PATH = "/v1/hooks/"  # .../v1/hooks/{host}: the same, for each host session's own key
TOKEN_ENV = "SESSIONWATCH_TOKEN"


def is_our_http_hook(handler: object, host: str) -> bool:
    """A Claude Code HTTP hook posting to a gateway's hook route for ``host``."""
    if not isinstance(handler, dict) or handler.get("type") != "http" or not isinstance(handler.get("url"), str):
        return False
    path = handler["url"].split("?", 1)[0]
    return ("/v1/sessions/" in path and path.endswith(f"{HTTP_HOOK_PATH}{host}")) or path.endswith(
        f"{OWN_HOOK_PATH}{host}"
    )


def is_ours(handler: object, host: str) -> bool:
    """One of our hook handlers: a command running ``sessionwatch ... hook HOST``, or an HTTP hook."""
    return isinstance(handler, dict) and (is_our_hook(handler.get("command"), host) or is_our_http_hook(handler, host))


def is_our_hook(command: object, host: str) -> bool:
    if not isinstance(command, str):
        return False
    try:
        tokens = shlex.split(command)
    except ValueError:
        return False
    pairs = any(a == "hook" and b == host for a, b in pairwise(tokens))
    return pairs and _is_sessionwatch(tokens)


def is_our_server(entry: object) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    raw_args = entry.get("args")
    args = raw_args if isinstance(raw_args, list) else []
    tokens = [entry["command"], *[a for a in args if isinstance(a, str)]]
    return "mcp" in tokens and _is_sessionwatch(tokens)


@dataclass
class Target:
    """One install: a host, a scope (project, local or user), a folder, and what the commands carry. Each room
    subclasses it with where its files are and what goes in them (``hooks_path``, ``mcp_path``, ``server``,
    ``install``, ``uninstall``) and how its host is checked (see ``checks.py``)."""

    host: str
    scope: str  # project, local or user
    dir: Path
    session: str | None = None
    agent: str | None = None
    global_args: list[str] = field(default_factory=list)

    adapter: ClassVar[HookAdapter]  # the room's hook adapter: which events our hooks are installed for
    no_local: ClassVar[str | None] = None  # why --local is refused (None: the host has a per-person file)

    @property
    def owner(self) -> str:
        """Which install a shared file's snapshot is for (``~/.claude.json`` serves several)."""
        return f"{self.host}:{self.scope}:{'' if self.scope == 'user' else self.dir}"

    @property
    def committed(self) -> bool:
        """Its files are meant to be committed: no path of this machine goes in."""
        return self.scope == "project"

    @property
    def hooks_path(self) -> Path:
        """The file our hook handlers are in."""
        raise NotImplementedError

    @property
    def mcp_path(self) -> Path:
        """The file our MCP server is registered in."""
        raise NotImplementedError

    def argv0(self) -> list[str]:
        return ["sessionwatch"] if self.committed else sessionwatch_argv()

    def hook_command(self) -> str:
        argv = [*self.argv0(), *self.global_args, "hook", self.host]
        if self.session:
            argv += ["--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        return shlex.join(argv)

    def server_argv(self) -> list[str]:
        argv = [*self.argv0(), *self.global_args, "mcp"]
        if self.session:
            argv += ["--session", self.session]
        if self.agent:
            argv += ["--agent", self.agent]
        return argv

    def server(self) -> dict[str, Any] | None:
        """The MCP server entry (None: the host gets none)."""
        return None

    def gateway(self) -> str | None:
        for flag, value in zip(self.global_args, self.global_args[1:], strict=False):
            if flag == "--gateway":
                return value
        return None

    def http_hook_url(self, event: str) -> str | None:
        """The gateway's hook route the host posts ``event`` to (None: the host runs the command)."""
        return None

    def own_hook_url(self, gateway: str) -> str:
        """The gateway's hook route for this install: the session's, or each host session's own key."""
        if self.session is None:  # each host session's own key, made by the gateway from the input
            url = f"{gateway.rstrip('/')}{OWN_HOOK_PATH}{self.host}"
        else:
            url = f"{gateway.rstrip('/')}/v1/sessions/{quote(self.session, safe=':@')}{HTTP_HOOK_PATH}{self.host}"
        return url + (f"?agentId={quote(self.agent, safe='')}" if self.agent else "")

    def handler(self, event: str) -> dict[str, Any]:
        url = self.http_hook_url(event)
        if url is not None:
            return {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer ${TOKEN_ENV}"},
                "allowedEnvVars": [TOKEN_ENV],
                "timeout": HOOK_TIMEOUT_S,
            }
        return {"type": "command", "command": self.hook_command(), "timeout": HOOK_TIMEOUT_S}

    def group(self, event: str) -> dict[str, Any]:
        return {"hooks": [self.handler(event)]}

    def events(self) -> tuple[str, ...]:
        """The events our hooks are installed for: the room's hook adapter's, answered and observed."""
        return (*self.adapter.events, *self.adapter.observes)

    def install(self, *, trust: bool = True) -> list[Change]:
        raise NotImplementedError

    # -- how doctor checks it (checks.py) --
    has_mcp: ClassVar[bool] = True  # whether the room registers an MCP server

    def find(self) -> Found | None:
        """What of ours is installed, for a room whose files are not a hooks file (None: read the hooks file
        and ``read_server``)."""
        return None

    def read_server(self) -> tuple[Any, Check | None]:
        """Our MCP server's entry as the host's file holds it (or None), and why the file cannot be read."""
        return None, None

    def command_checks(self, found: Found) -> list[Check]:
        """The room's checks of an installed hook command (Codex: is it trusted)."""
        return []

    def server_checks(self, server: dict[str, Any]) -> list[Check]:
        """The room's checks of its MCP server entry (may the host call its tools)."""
        return []

    def sample_payload(self, event: str) -> dict[str, Any]:
        """What the host sends on ``event`` (fields as the real binaries send them; see the host docs)."""
        return sample_payload(event, self.dir)

    def hook_env(self) -> dict[str, str]:
        """What the host adds to the environment of a hook command."""
        return {}

    def mcp_env(self, server: dict[str, Any]) -> dict[str, str]:
        """The environment the host starts its MCP servers with."""
        return {**os.environ}

    def uninstall(self) -> list[Change]:
        raise NotImplementedError

    def like(self, **changes: Any) -> Target:
        """The same install with some fields changed (its room's class kept)."""
        return replace(self, **changes)


T = TypeVar("T", bound=Target)


def sample_payload(event: str, cwd: Path) -> dict[str, Any]:
    """What a host sends on ``event``, the fields every host has (a room's ``Target.sample_payload`` adds its
    own)."""
    base: dict[str, Any] = {
        "session_id": "sessionwatch-verify",
        "transcript_path": None,
        "cwd": str(cwd),
        "hook_event_name": event,
        "permission_mode": "default",
    }
    if event == "UserPromptSubmit":
        base["prompt"] = "sessionwatch verify"
        base["turn_id"] = "verify-1"
    else:
        base["source"] = "startup"
    return base


class Skip(Exception):
    """Leave the file as it is, and say why."""


# -- formats -------------------------------------------------------------------------------------------
class JsonFormat:
    name = "JSON"

    @staticmethod
    def parse(path: Path, raw: bytes | None) -> Any:
        if raw is None:
            return {}
        try:
            data = json.loads(raw.decode("utf-8") or "{}")
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidArgument(f"{path} is not valid JSON ({exc}); nothing was changed") from None
        if not isinstance(data, dict):
            raise InvalidArgument(f"{path} does not hold a JSON object; nothing was changed")
        return data

    @staticmethod
    def dump(data: Any, raw: bytes | None) -> bytes:
        """In the file's own layout where it has one (indent, final newline), else two spaces."""
        text = raw.decode("utf-8") if raw else ""
        indent: int | str | None = 2
        if text.strip():
            m = re.search(r"\n([ \t]+)\S", text)
            indent = (m.group(1) if "\t" in m.group(1) else len(m.group(1))) if m else None
        end = "\n" if (not text or text.endswith("\n")) else ""
        return (json.dumps(data, indent=indent, ensure_ascii=False) + end).encode("utf-8")

    @staticmethod
    def empty(data: Any) -> bool:
        return not data


class TomlFormat:
    """Codex's ``config.toml``; tomlkit keeps the person's comments and layout."""

    name = "TOML"

    @staticmethod
    def parse(path: Path, raw: bytes | None) -> Any:
        import tomlkit

        try:
            return tomlkit.parse(raw.decode("utf-8")) if raw else tomlkit.document()
        except Exception as exc:  # noqa: BLE001 - tomlkit raises several types; each means the file is not TOML
            raise InvalidArgument(f"{path} is not valid TOML ({exc}); nothing was changed") from None

    @staticmethod
    def dump(doc: Any, raw: bytes | None) -> bytes:
        import tomlkit

        return tomlkit.dumps(doc).encode("utf-8")

    @staticmethod
    def empty(doc: Any) -> bool:
        return not doc.unwrap()


Format = type[JsonFormat] | type[TomlFormat]
Edit = Callable[[Any, snapshots.Snapshot | None], list[str]]


def install_file(t: Target, path: Path, fmt: Format, add: Edit, strip: Edit) -> Change:
    """Install into one file: ``add`` edits the parsed file and says what it did."""
    raw = snapshots.read_bytes(path)
    data = fmt.parse(path, raw)
    had_ours = bool(strip(fmt.parse(path, raw), None))
    snap = snapshots.begin(path, raw, had_ours)
    try:
        what = add(data, snap)
    except Skip as why:
        return Change(str(path), "skipped", note=str(why))
    if not what:
        return Change(str(path), "unchanged")
    new = fmt.dump(data, raw)
    if new == raw:
        return Change(str(path), "unchanged")
    if raw is None:
        snap.dirs = snapshots.make_parents(path) + snap.dirs
    snapshots.write_atomic(path, new)
    if t.owner not in snap.extra.setdefault("owners", []):
        snap.extra["owners"].append(t.owner)
    snapshots.save(snap, new)
    return Change(str(path), "created" if raw is None else "updated", what)


def revert_file(t: Target, path: Path, fmt: Format, strip: Edit, folders: list[str]) -> Change:
    """Uninstall from one file: its old bytes while it is as install left it and no other install
    shares it, else only our entries out (``strip``)."""
    raw = snapshots.read_bytes(path)
    snap = snapshots.load(path)
    owners = list(snap.extra.get("owners", [])) if snap else []
    others = [o for o in owners if o != t.owner]
    if raw is None:
        if snap is not None and not others:
            snapshots.drop(path)
        return Change(str(path), "unchanged")
    if snap is not None and snap.known and snap.matches(raw) and not others:
        snapshots.drop(path)
        if snap.before is None:
            path.unlink()
            folders += snap.dirs
            return Change(str(path), "removed", ["the file install created"])
        snapshots.write_atomic(path, snap.before)
        return Change(str(path), "restored", ["the content before install, byte for byte"])
    data = fmt.parse(path, raw)
    what = strip(data, snap)
    if snap is not None:
        snap.extra["owners"] = others
    created = snap is None or snap.before is None
    if what and fmt.empty(data) and created and not others:
        path.unlink()
        if snap is not None:
            folders += snap.dirs
        action, now = "removed", None
    elif what:
        now = fmt.dump(data, raw)
        snapshots.write_atomic(path, now)
        action = "updated"
    else:
        action, now = "unchanged", raw
    if snap is not None:
        if others:  # another install still has entries here: its snapshot lives on
            snapshots.save(snap, now)
        else:
            snapshots.drop(path)
    return Change(str(path), action, what)


# -- hooks (the same shape in Claude Code settings and Codex hooks.json) --------------------------------
def add_hooks(t: Target, data: dict[str, Any], path: Path) -> list[str]:
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument(f"{path}: 'hooks' is not an object; nothing was changed")
    what: list[str] = []
    for event in t.events():
        want = t.handler(event)
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"{path}: hooks.{event} is not a list; nothing was changed")
        seen = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for h in list(handlers):
                if is_ours(h, t.host):
                    if seen:  # a duplicate of ours: one is enough
                        handlers.remove(h)
                        what.append(f"hook {event} (duplicate removed)")
                    elif h != want:
                        h.clear()
                        h.update(want)
                        what.append(f"hook {event} (updated)")
                    seen = True
        if not seen:
            groups.append(t.group(event))
            what.append(f"hook {event}")
    return what


def strip_hooks(t: Target, data: dict[str, Any]) -> list[str]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    what: list[str] = []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        for group in list(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            ours = [h for h in handlers if is_ours(h, t.host)]
            if not ours:
                continue
            for h in ours:
                handlers.remove(h)
            what.append(f"hook {event}")
            if not handlers:
                groups.remove(group)
        if not groups and f"hook {event}" in what:
            del hooks[event]
    if not hooks and what:
        del data["hooks"]
    return what


def add_to_list(data: dict[str, Any], keys: tuple[str, ...], item: str, path: Path) -> bool:
    """Append ``item`` to the list at ``keys`` (creating it); False when it was there already."""
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise InvalidArgument(f"{path}: {'.'.join(keys[:-1])} is not an object; nothing was changed")
    items = node.setdefault(keys[-1], [])
    if not isinstance(items, list):
        raise InvalidArgument(f"{path}: {'.'.join(keys)} is not a list; nothing was changed")
    if item in items:
        return False
    items.append(item)
    return True


def drop_from_list(data: dict[str, Any], keys: tuple[str, ...], item: str) -> bool:
    chain = [data]
    for k in keys[:-1]:
        nxt = chain[-1].get(k)
        if not isinstance(nxt, dict):
            return False
        chain.append(nxt)
    items = chain[-1].get(keys[-1])
    if not isinstance(items, list) or item not in items:
        return False
    items.remove(item)
    if not items:  # take out the containers it leaves empty
        del chain[-1][keys[-1]]
        for parent, k in zip(reversed(chain[:-1]), reversed(keys[:-1]), strict=True):
            if parent[k]:
                break
            del parent[k]
    return True


def fix_command(t: Target, verb: str = "install") -> str:
    """The ``sessionwatch`` command line that (re)installs ``t``, one ``install`` accepts. A project install
    whose store is a file of this machine (or whose URL holds a password) would be refused
    (``refuse_machine_paths``): the fix is this person's files (``--local``) where the host has them, else
    the project install without ``--store``, the store then coming from ``SESSIONWATCH_STORE``."""
    note = ""
    if verb == "install" and t.committed and _names_this_machine(t.global_args):
        if t.no_local is None:
            t = t.like(scope="local")
        else:
            args = list(t.global_args)
            i = args.index("--store")
            del args[i : i + 2]
            t = t.like(global_args=args)
            note = f"  # and set SESSIONWATCH_STORE where {t.host} runs"
    argv = ["sessionwatch", *t.global_args, verb, t.host, f"--{t.scope}"]
    if t.scope != "user":
        argv += ["--dir", str(t.dir)]
    if t.session and verb == "install":
        argv += ["--session", t.session]
    if t.agent and verb == "install":
        argv += ["--agent", t.agent]
    return shlex.join(argv) + note


def _names_this_machine(global_args: list[str]) -> bool:
    """Would a project install refuse these options (a store file of this machine, a password)?"""
    try:
        refuse_machine_paths(global_args)
    except InvalidArgument:
        return True
    return False


def check_options(t: Target) -> None:
    """Refuse what cannot be meant (InvalidArgument, nothing written)."""
    if t.scope == "local" and t.no_local is not None:
        raise InvalidArgument(t.no_local)
    if t.session is not None:
        parse_key(t.session, "--session")
    if t.scope == "user" and t.session is not None:
        raise InvalidArgument(
            "--user installs for every session on this machine, so --session would bind them all to one "
            "key. Bind a project with --project or --local --session KEY; for --user, each host session "
            "gets its own key from its host session id (agent:<folder>:claude:<id>, agent:<folder>:codex:<id>)"
        )
    if t.committed:
        refuse_machine_paths(t.global_args)


def refuse_machine_paths(global_args: list[str]) -> None:
    """The project scope's files are committed: a store file is a path of this machine, and a database
    password is a secret."""
    for flag, value in pairwise(global_args):
        if flag != "--store":
            continue
        from urllib.parse import urlsplit

        from ..store_urls import POSTGRES_SCHEMES

        if not value.startswith(POSTGRES_SCHEMES):
            raise InvalidArgument(
                f"--store {value} is a file of this machine, and --project writes files a team commits: "
                "use --local (this person's files), or leave --store out and set SESSIONWATCH_STORE"
            )
        if urlsplit(value).password:
            raise InvalidArgument(
                "--store holds a password, and --project writes files a team commits: use --local, or "
                "leave --store out and set SESSIONWATCH_STORE"
            )


def make_target(
    cls: type[T],
    scope: str = "project",
    directory: str | os.PathLike[str] | None = None,
    session: str | None = None,
    agent: str | None = None,
    global_args: list[str] | None = None,
) -> T:
    """A room's install target (``cls``: its Target class), its folder resolved, its agent fixed."""
    if scope not in SCOPES:
        raise InvalidArgument(f"scope must be one of {', '.join(SCOPES)}")
    folder = Path(directory or os.getcwd()).resolve()
    if agent is None and session is None and scope != "user":
        # zero-config keys name the project's agent: its folder's name, fixed now, so a teammate's clone
        # in another folder (or a session started in a subfolder) is the same agent
        agent = agent_from_folder(str(folder))
    return cls(cls.adapter.name, scope, folder, session, agent, list(global_args or []))
