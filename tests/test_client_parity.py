"""``Gateway``, ``GatewayClient`` and ``AsyncGatewayClient`` offer one API: this fails when they drift apart.

A method added to one of them must be added to the others with the same parameters (names, kinds and
defaults), or be listed below with the reason it belongs to one side only. ``docs/python.md`` carries
the same lists.
"""

from __future__ import annotations

import inspect
import typing

from sessionwatch import Gateway
from sessionwatch.client import AsyncGatewayClient, GatewayClient
from sessionwatch.engine.schemas import TOOL_RESULTS
from sessionwatch.types import RESULT_TYPES

# In-process only: they hand out engine objects, take callbacks, or drive the engine's own machinery.
GATEWAY_ONLY = {
    "open": "opens a store by URL (a client connects with its constructor)",
    "record": "records a raw EventInput (producers over HTTP are inbound/set_goal/runs/compactions)",
    "resolve": "engine helper: parses a key and finds its agent",
    "session": "engine helper: returns a SessionRow",
    "session_with_version": "engine helper: a SessionRow and its stateVersion in one read (session_status)",
    "session_status_row": "engine helper: a SessionRow, its stateVersion and its lifecycle in one read",
    "list_sessions": "returns SessionRows; remotely use the sessions_list tool",
    "list_sessions_page": "returns SessionRows and the next cursor; remotely use the sessions_list tool",
    "changes_since": "returns a ChangesPage; remotely use session_status with changesSince",
    "acknowledge": "acknowledges by target inside a drain; not a route",
    "subscribe_wakes": "takes a Python callback; a client streams wakes with stream_wakes",
    "wait_for_reply": "blocks on an in-process condition; sessions_send timeoutSeconds does it remotely",
    "own_user_texts": "upstream monitor helper",
    "dropped_recordings_of": "engine helper: the drop counts of some agents (a scoped token's health figures)",
    "add_periodic": "registers timed work with this process's timer thread",
    "run_due": "runs this process's due timers (tests with an injected clock)",
    "readiness": "the engine's write probe; a client asks the gateway with health",
    "reconcile": "what a watcher's session_status read does to its cursor; remotely that tool call does it",
    "log_bounds": "the log stream's resume check; a client sees it as the stream's gap event",
    "set_observer": "installs this process's metrics hooks (engine/observe.py)",
    "pending_wake": "the wake a (re)connecting subscriber gets; a client gets it from stream_wakes",
    "enable_tracing": "this process's OpenTelemetry spans (sessionwatch/tracing.py)",
    "lifecycle_of": "engine helper: one session's {state, since}; remotely get_session or session_status show it",
    "check_lost": "runs this process's lost timer now (its timer runs it on its own)",
    "deliver_system_events": "a leased delivery for an in-process face (settle or release it); the drain route uses it",
    "create_token": "stored tokens are managed on the store itself (sessionwatch token), never over HTTP",
    "list_tokens": "stored tokens are managed on the store itself (sessionwatch token), never over HTTP",
    "revoke_token": "stored tokens are managed on the store itself (sessionwatch token), never over HTTP",
    "token": "the authenticator's look-up of a stored token's row",
    "stored_data_settings": "the data settings live with the store (sessionwatch settings), never read over HTTP",
    "set_data_settings": "the data settings live with the store (sessionwatch settings), never changed over HTTP",
    "thread_links": "the hook's look-up of a thread's adoption links; remotely the gateway's hook route does it",
}
# Parameters only the in-process engine takes: a client's credentials decide them on the server side.
GATEWAY_ONLY_PARAMS = {
    ("call_tool", "scope"): "the token's agents; over HTTP the gateway sets it from the bearer token",
    ("events_after", "agents"): "the token's agents; over HTTP the gateway sets it from the bearer token",
    ("pair_node", "verify"): "skipping the node check is for in-process use; over HTTP the gateway always checks",
}
# Over HTTP only.
CLIENT_ONLY = {
    "health": "the gateway process's readiness",
    "stream_wakes": "the SSE wake stream (in-process: subscribe_wakes)",
    "follow_log": "the SSE log stream with resume (in-process: events_after)",
    "answer_hook": "a host's hook answered by the gateway (in-process: hooks.run.answer_in_process)",
    "hooks_handed_out": "what the gateway's hook route handed out (in-process: hooks.delivery.handed_out)",
}


def _public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member) and not isinstance(member, type)
    }


def _params(fn: object, method: str = "") -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [
        (p.name, p.kind, p.default)
        for p in sig.parameters.values()
        if p.name != "self" and (method, p.name) not in GATEWAY_ONLY_PARAMS
    ]


def test_the_three_offer_the_same_methods_apart_from_the_documented_ones() -> None:
    gateway, sync, aio = _public(Gateway), _public(GatewayClient), _public(AsyncGatewayClient)
    assert set(gateway) - set(sync) == set(GATEWAY_ONLY), "Gateway-only methods changed: update GATEWAY_ONLY"
    assert set(sync) - set(gateway) == set(CLIENT_ONLY), "client-only methods changed: update CLIENT_ONLY"
    assert set(sync) == set(aio), "GatewayClient and AsyncGatewayClient differ"


def test_shared_methods_take_the_same_parameters() -> None:
    gateway, sync, aio = _public(Gateway), _public(GatewayClient), _public(AsyncGatewayClient)
    for name in sorted(set(sync)):
        assert _params(sync[name]) == _params(aio[name]), name
        if name in gateway:
            assert _params(gateway[name], name) == _params(sync[name]), name


def test_the_async_client_is_async_throughout() -> None:
    for name, member in _public(AsyncGatewayClient).items():
        if name in ("stream_wakes", "follow_log"):
            assert inspect.isasyncgenfunction(member)
        else:
            assert inspect.iscoroutinefunction(member), name
    for name, member in _public(GatewayClient).items():
        assert not inspect.iscoroutinefunction(member) and not inspect.isasyncgenfunction(member), name


def test_typed_results_match_the_published_schemas() -> None:
    """The TypedDicts of sessionwatch.types and the JSON Schemas of engine.schemas describe the same keys."""
    assert set(RESULT_TYPES) == set(TOOL_RESULTS)
    for name, td in RESULT_TYPES.items():
        schema = TOOL_RESULTS[name]
        assert set(typing.get_type_hints(td)) == set(schema["properties"]), name
        assert set(td.__required_keys__) == set(schema["required"]), name  # type: ignore[attr-defined]
