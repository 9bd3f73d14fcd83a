"""Paired nodes: the node protocol (auth, paging, classification, path safety) and monitoring a thread
on another machine (paging back past 50 items, self-echo, a definitive 404 as a miss)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from sessionwatch import InvalidArgument, NotFound, Settings
from sessionwatch.clock import ManualClock
from sessionwatch.errors import StoreUnavailable, Unauthorized
from sessionwatch.node_server import create_node_app
from tests.support.ports import ServerThread

from .conftest import HangingServer, Harness
from .writers import ClaudeTranscript, CodexRollout

TOKEN = "node-secret-token"


@pytest.fixture
def node_roots(tmp_path: Path) -> tuple[Path, Path]:
    claude, codex = tmp_path / "node-claude", tmp_path / "node-codex"
    (claude / "projects").mkdir(parents=True)
    (codex / "sessions").mkdir(parents=True)
    return claude, codex


@pytest.fixture
def node(node_roots):
    app = create_node_app(TOKEN, claude_root=str(node_roots[0]), codex_root=str(node_roots[1]))
    with ServerThread(app) as server:
        yield server


def get(node: ServerThread, path: str, token: str | None = TOKEN, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(node.url + path, params=params, headers=headers, timeout=10)


def test_node_requires_the_token(node):
    assert get(node, "/v1/node/threads", token=None).status_code == 401
    r = get(node, "/v1/node/threads", token="wrong")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert get(node, "/v1/node/health", token=None).status_code == 200
    assert httpx.post(node.url + "/v1/node/threads", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 405


def test_node_lists_and_pages_items_newest_first(node, node_roots):
    t = ClaudeTranscript(node_roots[0])
    for i in range(7):
        t.prompt(f"prompt {i}")
        t.assistant(f"answer {i}")
    threads = get(node, "/v1/node/threads", catalog="claude").json()["threads"]
    assert [x["threadId"] for x in threads] == [t.session_id] and "filePath" not in threads[0]
    assert threads[0]["title"] == "prompt 0"
    base = f"/v1/node/threads/claude/{t.session_id}/items"
    page = get(node, base, limit=4).json()
    assert [i["kind"] for i in page["items"]] == ["other", "human_prompt", "other", "human_prompt"]
    assert page["items"][1]["text"] == "prompt 6" and "text" not in page["items"][0]
    seen = [i["id"] for i in page["items"]]
    while page["nextBefore"]:
        page = get(node, base, limit=4, before=page["nextBefore"]).json()
        seen += [i["id"] for i in page["items"]]
    assert len(seen) == len(set(seen)) == 14
    offsets = [int(i.split("-")[0]) for i in seen]
    assert offsets == sorted(offsets, reverse=True) and offsets[-1] == 0
    assert len(get(node, base, limit=1000).json()["items"]) == 14  # clamped to 200, there are only 14


@pytest.mark.parametrize(
    "path,params,code",
    [
        ("/v1/node/threads/claude/..%2F..%2Fetc/items", {}, 404),
        ("/v1/node/threads/claude/../items", {}, 404),
        ("/v1/node/threads/claude/a..b/items", {}, 400),
        ("/v1/node/threads/claude/.hidden/items", {}, 400),
        ("/v1/node/threads/claude/a%20b/items", {}, 400),
        ("/v1/node/threads/gemini/abc/items", {}, 400),
        ("/v1/node/threads", {"catalog": "gemini"}, 400),
        ("/v1/node/threads/claude/abc/items", {"before": "../1"}, 400),
        ("/v1/node/threads/claude/abc/items", {"limit": "0"}, 400),
        ("/v1/node/threads/claude/abc/items", {"limit": "ten"}, 400),
        ("/v1/node/threads/claude/00000000-0000-0000-0000-000000000000/items", {}, 404),
    ],
)
def test_node_refuses_bad_ids_clearly(node, path, params, code):
    r = httpx.get(node.url + path, params=params, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == code
    body = r.json()
    assert body["error"]["code"] in ({"invalid_argument"} if code == 400 else {"not_found", "thread_not_found"})


def test_node_unknown_thread_is_a_definitive_404(node):
    r = get(node, "/v1/node/threads/claude/4f1c2b9e-0000-4000-8000-000000000000/items")
    assert r.status_code == 404 and r.json()["error"]["code"] == "thread_not_found"


def test_node_never_serves_files_outside_the_roots(node, node_roots, tmp_path):
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    secret = ClaudeTranscript(secret_dir)  # a real transcript, but outside the node's root
    secret.prompt("private")
    project = node_roots[0] / "projects" / "-home-dev-x"
    project.mkdir()
    os.symlink(secret.path, project / "11111111-1111-4111-8111-111111111111.jsonl")  # file symlink out
    os.symlink(secret.dir, node_roots[0] / "projects" / "-escape")  # directory symlink out
    for tid in ("11111111-1111-4111-8111-111111111111", secret.session_id):
        r = get(node, f"/v1/node/threads/claude/{tid}/items")
        assert r.status_code == 404 and r.json()["error"]["code"] == "thread_not_found"
    assert get(node, "/v1/node/threads", catalog="claude").json()["threads"] == []
    # a symlink that stays inside the root is fine
    inside = ClaudeTranscript(node_roots[0], cwd="/inside")
    inside.prompt("visible")
    os.symlink(inside.path, project / "22222222-2222-4222-8222-222222222222.jsonl")
    assert get(node, "/v1/node/threads/claude/22222222-2222-4222-8222-222222222222/items").status_code == 200


def test_node_before_must_be_a_row_boundary(node, node_roots):
    t = ClaudeTranscript(node_roots[0])
    t.prompt("one")
    t.prompt("two")
    r = get(node, f"/v1/node/threads/claude/{t.session_id}/items", before="5-0123456789ab")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_argument"


def test_node_classifies_oversized_rows_with_digests(node, node_roots):
    t = ClaudeTranscript(node_roots[0])
    t.prompt("huge " * 250_000)  # 1.25 MB row
    t.tool_result("z" * 1_200_000)
    items = get(node, f"/v1/node/threads/claude/{t.session_id}/items").json()["items"]
    assert [i["kind"] for i in items] == ["other", "human_prompt"]
    assert items[1]["textTruncated"] and ":" in items[1]["textDigest"] and len(items[1]["text"]) <= 65536


def test_node_serves_codex_rollouts(node, node_roots):
    r = CodexRollout(node_roots[1])
    r.user_legacy("codex on the node")
    r.agent("ok")
    threads = get(node, "/v1/node/threads", catalog="codex").json()["threads"]
    assert threads[0]["threadId"] == r.thread_id and threads[0]["catalogId"] == "codex"
    items = get(node, f"/v1/node/threads/codex/{r.thread_id}/items").json()["items"]
    assert [i.get("text") for i in items if i["kind"] == "human_prompt"] == ["codex on the node"]


# -- the gateway side ------------------------------------------------------------------------------
def paired(harness: Harness, node: ServerThread, node_id: str = "laptop") -> str:
    out = harness.gw.pair_node(node_id, node.url, TOKEN)
    assert out == {
        "nodeId": node_id,
        "url": node.url,
        "createdAt": out["createdAt"],
        "updatedAt": out["updatedAt"],
        "hostId": f"node:{node_id}",
    }
    return f"node:{node_id}"


def test_gateway_lists_node_threads_and_monitors_one(harness: Harness, node, node_roots):
    host = paired(harness, node)
    local = ClaudeTranscript(harness.claude_root)
    remote = ClaudeTranscript(node_roots[0])
    remote.prompt("history on the laptop")
    listing = harness.gw.list_threads("claude")
    assert {(t["hostId"], t["threadId"]) for t in listing} == {
        ("gateway:local", local.session_id),
        (host, remote.session_id),
    }
    key = harness.adopt("claude", remote.session_id, host_id=host)
    assert key == f"agent:main:claude:laptop:{remote.session_id}"
    link = harness.gw.link(key)
    assert link["upstreamRef"] == {"nodeId": "laptop", "threadId": remote.session_id}
    assert link["marker"]["id"].startswith("0-")
    assert harness.entry(harness.tick(), key)["status"] == "unchanged"
    harness.gw.call_tool("sessions_send", {"sessionKey": key, "message": "our own prompt"}, caller="agent:main:main")
    remote.prompt("our own prompt", source=None)
    remote.prompt("a person on the laptop")
    remote.prompt("and again", source="queued")
    res = harness.entry(harness.tick(), key)
    assert res["status"] == "recorded" and res["humanTurns"] == 2
    (ev,) = harness.events(key, "human_direct_message")
    assert ev["payload"] == {"turns": 2} and ev["summary"] == "human message via claude"


def test_gateway_pages_back_past_fifty_items(harness: Harness, node, node_roots):
    host = paired(harness, node)
    remote = ClaudeTranscript(node_roots[0])
    key = harness.adopt("claude", remote.session_id, host_id=host)
    assert harness.gw.link(key)["marker"] == {"id": None}  # empty thread at adoption
    remote.prompt("first")
    harness.tick()
    remote.prompt("the person typed, then the agent worked for a long time")
    for i in range(130):
        remote.assistant(f"step {i}")
    res = harness.entry(harness.tick(), key)
    assert res["humanTurns"] == 1 and "note" not in res  # the marker was found on page 3
    assert harness.human_turns(key) == 2


def test_gateway_stops_paging_after_the_page_budget(tmp_path, roots, node, node_roots):
    h = Harness(
        f"sqlite:///{tmp_path}/s.db", ManualClock(), *roots, settings=Settings(node_page_size=5, node_max_pages=2)
    )
    try:
        host = paired(h, node)
        remote = ClaudeTranscript(node_roots[0])
        remote.prompt("history")
        key = h.adopt("claude", remote.session_id, host_id=host)
        remote.prompt("too far back to be seen")
        for i in range(12):
            remote.assistant(f"step {i}")
        res = h.entry(h.tick(), key)
        assert res["status"] == "advanced" and "marker not found" in res["note"]
        newest = httpx.get(
            f"{node.url}/v1/node/threads/claude/{remote.session_id}/items",
            params={"limit": 1},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ).json()["items"][0]["id"]
        assert h.gw.link(key)["marker"] == {"id": newest}
    finally:
        h.close()


def test_deleted_remote_thread_raises_upstream_missing(harness: Harness, node, node_roots):
    host = paired(harness, node)
    remote = ClaudeTranscript(node_roots[0])
    remote.prompt("history")
    key = harness.adopt("claude", remote.session_id, host_id=host)
    remote.path.unlink()
    assert [harness.entry(harness.tick(), key)["status"] for _ in range(3)] == ["missing", "missing", "removed"]
    (ev,) = harness.events(key, "upstream_missing")
    assert ev["payload"] == {"channel": "claude"}


def test_unreachable_or_unauthorized_node_is_inconclusive(harness: Harness, node, node_roots):
    host = paired(harness, node)
    remote = ClaudeTranscript(node_roots[0])
    remote.prompt("history")
    key = harness.adopt("claude", remote.session_id, host_id=host)
    remote.path.unlink()
    harness.tick()  # one definitive miss
    harness.gw.pair_node("laptop", node.url, "a-wrong-token", verify=False)  # the node's token changed since
    assert harness.entry(harness.tick(), key)["status"] == "unchanged"  # 401: not a miss, breaks the streak
    assert harness.gw.link(key)["missCount"] == 0
    with HangingServer() as hang:
        harness.gw.pair_node("laptop", hang.url, TOKEN, verify=False)
        harness.gw.upstream.configure(node_timeout_s=0.3)
        assert harness.entry(harness.tick(), key)["status"] == "unchanged"
        assert harness.gw.list_threads("claude") == []  # listing leaves an unreachable node out
    assert harness.gw.link(key) is not None


def test_continue_on_a_node_errors(harness: Harness, node, node_roots):
    with pytest.raises(NotFound):
        harness.gw.continue_thread("claude", "abc", host_id="node:ghost")  # not paired
    host = paired(harness, node)
    with pytest.raises(NotFound):
        harness.gw.continue_thread("claude", "4f1c2b9e-0000-4000-8000-000000000000", host_id=host)
    with pytest.raises(InvalidArgument):
        harness.gw.continue_thread("claude", "abc", host_id="node:bad id")
    with pytest.raises(InvalidArgument):
        harness.gw.continue_thread("claude", "abc", host_id="elsewhere")
    assert harness.gw.list_sessions() == []
    remote = ClaudeTranscript(node_roots[0])
    harness.gw.pair_node("laptop", "http://127.0.0.1:9", TOKEN, verify=False)  # nothing listens: no baseline, no link
    res = harness.gw.continue_thread("claude", remote.session_id, host_id=host)
    assert res["linked"] is False and res["link"] is None and "unreachable" in res["reason"]


@pytest.mark.parametrize(
    "args",
    [
        ("bad id", "http://127.0.0.1:1", "t"),
        ("n", "ftp://x", "t"),
        ("n", "http://", "t"),
        ("n", "http://h", ""),
        ("n", "http://h", "has space"),
        ("", "http://h", "t"),
        ("n", 5, "t"),
    ],
)
def test_pair_node_refuses_bad_input(harness: Harness, args):
    with pytest.raises(InvalidArgument):
        harness.gw.pair_node(*args)
    assert harness.gw.store.nodes() == []


def test_pair_node_checks_the_token_at_once(harness: Harness, node):
    """A wrong token is unauthorized and an unreachable node unavailable when pairing, and nothing is stored."""
    with pytest.raises(Unauthorized, match="refused the token"):
        harness.gw.pair_node("laptop", node.url, "a-wrong-token")
    with pytest.raises(StoreUnavailable, match="nothing was paired"):
        harness.gw.pair_node("laptop", "http://127.0.0.1:9", TOKEN)
    assert harness.gw.store.nodes() == []
    paired(harness, node)
    with pytest.raises(Unauthorized):  # re-pairing with a bad token keeps the working pairing
        harness.gw.pair_node("laptop", node.url, "a-wrong-token")
    assert [n.token for n in harness.gw.store.nodes()] == [TOKEN]


def test_listing_one_node_by_host_id(harness: Harness, node, node_roots):
    host = paired(harness, node)
    c = ClaudeTranscript(node_roots[0])
    x = CodexRollout(node_roots[1])
    got = {(t["catalogId"], t["threadId"], t["hostId"]) for t in harness.gw.list_threads(host)}
    assert got == {("claude", c.session_id, host), ("codex", x.thread_id, host)}
