"""``sessionwatch token``: a random token (no subcommand), or bearer tokens kept in the store.

``token create`` writes a hashed row into the store's token table (the store a gateway serves, SQLite or
PostgreSQL) and prints the token once; ``token list`` and ``token revoke`` manage the rows. A gateway
started with --token accepts these tokens besides its own admin token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from ..errors import InvalidArgument
from ..tokens import random_token
from .app import CONTEXT, State, cli, command, json_option, pass_state
from .output import emit, record_table, ts

if TYPE_CHECKING:
    from rich.console import Console  # rich loads only when a table is shown (output.py)

    from ..engine import Gateway


@contextmanager
def _store(state: State) -> Iterator[Gateway]:
    """The engine on the store the tokens live in: the global --store (or the default store), never a
    --gateway. Opened read-only (no sweep, prune or timers, no data settings stored): only the token
    command itself writes, and a token command leaves a new store's data settings to its first server."""
    if state.gateway:
        raise InvalidArgument(
            "token management works on the store itself: give --store (the URL of the store "
            "the gateway serves), not --gateway"
        )
    from ..engine import Gateway

    gw = Gateway.open(state.store, timers=False, read_only=True, prune_on_open=False)
    try:
        yield gw
    finally:
        gw.close()


def _print_random(state: State) -> None:
    tok = random_token()
    emit(state.json, {"token": tok}, lambda c: c.print(tok, markup=False))


@cli.group("token", invoke_without_command=True, context_settings=CONTEXT)
@json_option
@click.pass_context
def token_group(ctx: click.Context) -> None:
    """Print a new random bearer token, or manage tokens scoped to agents.

    Without a subcommand: print a strong random token (for serve --token, node --token, pair --token);
    nothing is stored. The subcommands manage tokens kept (hashed) in the store: a scoped token may act
    as, and read, only the sessions of its agents.

    \b
    Examples:
      export SESSIONWATCH_TOKEN=$(sessionwatch token)
      sessionwatch serve --host 0.0.0.0 --token "$SESSIONWATCH_TOKEN"
      sessionwatch --store postgresql://sw@db/sw token create --agent ops --name ops-team
      sessionwatch token list
      sessionwatch token revoke 3f9a0c2b71de
    """
    if ctx.invoked_subcommand is None:
        _print_random(ctx.ensure_object(State))


@command(token_group, "generate")
@pass_state
def token_generate(state: State) -> None:
    """Print a new random bearer token (same as 'sessionwatch token'); nothing is stored."""
    _print_random(state)


@command(token_group, "create")
@click.option(
    "--agent", "agents", multiple=True, metavar="AGENT_ID", help="Agent id the token is scoped to (repeat for several)."
)
@click.option("--admin", is_flag=True, help="An admin token: every session, every route.")
@click.option("--name", metavar="NAME", help="A label for 'token list' (who holds it).")
@pass_state
def token_create(state: State, agents: tuple[str, ...], admin: bool, name: str | None) -> None:
    """Create a token in the store and print it ONCE (only its hash is kept).

    \b
    Examples:
      sessionwatch token create --agent ops
      sessionwatch token create --agent ops --agent dev --name release-bot
      sessionwatch --store postgresql://sw@db/sw token create --admin --name oncall
    """
    with _store(state) as gw:
        text, row = gw.create_token(agents=agents, admin=admin, name=name)
    scope = "admin" if row.admin else "agents " + ", ".join(row.agents)

    def human(c: Console) -> None:
        c.print(text, markup=False)
        c.print(f"token {row.token_id} ({scope}); shown once, store it now", markup=False, style="dim")

    emit(state.json, {**row.to_json(), "token": text}, human)


@command(token_group, "list")
@pass_state
def token_list(state: State) -> None:
    """List the store's tokens: id, name, agents, created, revoked (never the token itself)."""
    with _store(state) as gw:
        rows = [t.to_json() for t in gw.list_tokens()]
    shown = [
        {
            "id": r["id"],
            "name": r["name"] or "",
            "agents": "admin" if r["admin"] else ", ".join(r["agents"]),
            "created": ts(r["createdAt"]),
            "revoked": ts(r["revokedAt"]) if r["revoked"] else "",
        }
        for r in rows
    ]
    emit(state.json, {"tokens": rows}, lambda c: c.print(record_table("tokens", shown)))


@command(token_group, "revoke")
@click.argument("token_id", metavar="ID")
@pass_state
def token_revoke(state: State, token_id: str) -> None:
    """Revoke token ID; every gateway on the store refuses it within a second. Exit 3 if there is no ID."""
    with _store(state) as gw:
        revoked = gw.revoke_token(token_id)
    emit(
        state.json,
        {"id": token_id, "revoked": revoked},
        lambda c: c.print(f"token {token_id} " + ("revoked" if revoked else "was already revoked"), markup=False),
    )
