"""The ``sessionwatch`` click group: global options, the backend seam, JSON mode and exit codes."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from .. import __version__, exitcodes
from ..errors import SessionwatchError
from .backend import Backend

# The modules that register the group's commands, imported on first need (see Group.get_command): a
# command loads only its own module (a plain `sessionwatch sessions` never imports the servers' kit);
# help and an unknown name load them all. tests/cli/test_help.py keeps LAZY equal to what registers.
COMMAND_MODULES = ("demo", "servers", "sessions", "settings_cmd", "tokens", "tools", "top", "upstream", "hooks")
LAZY = {
    **dict.fromkeys(("adopt", "link", "pair", "threads", "tick", "upstream-results"), "upstream"),
    **dict.fromkeys(
        (
            "cursors",
            "drain",
            "inbound",
            "lifecycle",
            "log",
            "prune",
            "put",
            "send",
            "sessions",
            "status",
            "unwatch",
            "watch",
        ),
        "sessions",
    ),
    **dict.fromkeys(("doctor", "hook", "install", "uninstall"), "hooks"),
    **dict.fromkeys(("mcp", "node", "serve"), "servers"),
    "demo": "demo",
    "settings": "settings_cmd",
    "token": "tokens",
    "tool": "tools",
    "top": "top",
}


def print_json(data: Any) -> None:
    from .output import print_json as out

    out(data)


def err_console() -> Any:
    from .output import err_console as make

    return make()


F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    store: str | None = None
    gateway: str | None = None
    token: str | None = None
    json: bool = False
    store_from_env: bool = False  # --store came from SESSIONWATCH_STORE, not the command line
    _backend: Backend | None = field(default=None, repr=False)

    def backend(self, *, timers: bool = False, read_only: bool = False) -> Backend:
        """Opened on first use, so ``--help`` and ``token`` never touch a store. ``read_only``: the command
        only reads, so opening it never sweeps or prunes."""
        if self._backend is None:
            self._backend = Backend.open(
                store=self.store, gateway=self.gateway, token=self.token, timers=timers, read_only=read_only
            )
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def _fail(state: State | None, code: int, error: dict[str, Any]) -> None:
    if state is not None and state.json:
        print_json(error)
    else:
        from rich.text import Text

        line = Text.assemble(("error", "bold red"), f" ({error['error']['code']}): {error['error']['message']}")
        err_console().print(line)
    sys.exit(code)


class JsonUsageError(click.ClickException):
    """A click usage error shown as the JSON error object on stdout (``--json`` was given)."""

    def __init__(self, original: click.ClickException) -> None:
        super().__init__(original.format_message())
        self.exit_code = original.exit_code  # type: ignore[misc]  # keep click's code (2 for usage)

    def show(self, file: Any = None) -> None:
        print_json({"error": {"code": "invalid_argument", "message": self.message}})


def _json_requested(args: list[str]) -> bool:
    """``--json`` anywhere before a ``--`` (a usage error can come before click has parsed it)."""
    head = args[: args.index("--")] if "--" in args else args
    return "--json" in head


class Group(click.Group):
    """Turns sessionwatch errors into their documented exit codes (see docs/cli.md), and usage errors
    into JSON under ``--json``."""

    _json_args = False
    _all_loaded = False

    def _load_all(self) -> None:
        if not self._all_loaded:
            self._all_loaded = True
            for name in COMMAND_MODULES:
                importlib.import_module(f"{__package__}.{name}")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in LAZY:
                importlib.import_module(f"{__package__}.{LAZY[cmd_name]}")
            else:
                self._load_all()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)

    def main(self, args: Any = None, *a: Any, **kw: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        self._json_args = _json_requested(argv)
        return super().main(argv, *a, **kw)

    def _usage(self, exc: click.ClickException, ctx: click.Context | None = None) -> click.ClickException:
        state = ctx.find_object(State) if ctx is not None else None
        wanted = self._json_args or (state is not None and state.json)
        return JsonUsageError(exc) if wanted and not isinstance(exc, JsonUsageError) else exc

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:  # a top-level option error, before any command ran
            raise self._usage(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.ClickException as exc:
            raise self._usage(exc, ctx) from None
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except SessionwatchError as exc:
            _fail(ctx.find_object(State), exitcodes.exit_code_for(exc), exc.to_json())
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            raise  # the reader went away (| head): click exits quietly
        except Exception as exc:  # unexpected: say what happened, exit 1, no traceback for operators
            logging.getLogger("sessionwatch.cli").debug("unexpected error", exc_info=True)
            _fail(
                ctx.find_object(State),
                exitcodes.ERROR,
                {"error": {"code": "internal", "message": f"{exc.__class__.__name__}: {exc}"}},
            )
        finally:
            state = ctx.find_object(State)
            if state is not None:
                state.close()


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


json_option = click.option(
    "--json",
    "json_flag",
    is_flag=True,
    expose_value=False,
    callback=_set_json,
    is_eager=True,
    help="Print machine-readable JSON instead of tables.",
)

pass_state = click.make_pass_decorator(State, ensure=True)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def command(group: click.Group, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """``group.command`` plus the ``--json`` flag every command has."""

    def deco(fn: F) -> F:
        return group.command(name, context_settings=CONTEXT, **kwargs)(json_option(fn))  # type: ignore[return-value]

    return deco


def _check_gateway(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or value == "":
        return None
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise click.BadParameter(f"must be an http:// or https:// URL such as http://127.0.0.1:7878, got {value!r}")
    return value


@click.group(cls=Group, context_settings=CONTEXT)
@click.option(
    "--store",
    envvar="SESSIONWATCH_STORE",
    metavar="URL",
    help="Local store URL (sqlite:///file.db, a path, postgresql://...). Env: SESSIONWATCH_STORE. "
    "Default: ~/.local/state/sessionwatch/sessionwatch.db.",
)
@click.option(
    "--gateway",
    envvar="SESSIONWATCH_GATEWAY",
    metavar="URL",
    callback=_check_gateway,
    help="Talk to a running gateway (http:// or https:// URL) instead of a local store. Env: SESSIONWATCH_GATEWAY.",
)
@click.option(
    "--token", envvar="SESSIONWATCH_TOKEN", metavar="TOKEN", help="Bearer token for --gateway. Env: SESSIONWATCH_TOKEN."
)
@click.option("--json", "json_flag", is_flag=True, help="Print machine-readable JSON (also per command).")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="Log level (logs always go to stderr).",
)
@click.version_option(__version__, prog_name="sessionwatch")  # the one version, not stale install metadata
@click.pass_context
def cli(
    ctx: click.Context, store: str | None, gateway: str | None, token: str | None, json_flag: bool, log_level: str
) -> None:
    """sessionwatch: session state awareness for multi-agent systems.

    Reads and writes a local store by default; with --gateway URL every command talks to a running
    gateway instead. Every command takes --json and documents its exit codes:
    0 ok, 1 unexpected/unavailable, 2 usage or invalid argument, 3 not found,
    4 unauthorized/forbidden, 5 conflict.

    \b
    Examples:
      sessionwatch serve --port 7878
      sessionwatch sessions
      sessionwatch status agent:main:subagent:researcher --since 12
      sessionwatch --gateway http://127.0.0.1:7878 --token $TOKEN log --follow
      sessionwatch demo
    """
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    state = ctx.ensure_object(State)
    state.store, state.gateway, state.token = store, gateway, token
    state.store_from_env = ctx.get_parameter_source("store") == click.core.ParameterSource.ENVIRONMENT
    if token and not gateway and ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
        # From the environment it may be meant for 'serve', which reads SESSIONWATCH_TOKEN too.
        err_console().print(
            "warning: --token is ignored without --gateway (it authenticates to a remote gateway; "
            "'serve --token' sets the gateway's own token)",
            markup=False,
        )
    state.json = state.json or json_flag
