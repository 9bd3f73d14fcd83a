"""The node ``sessionwatch node`` runs: this machine's transcripts served to a gateway, read-only.

The node itself lives below the engine, in ``upstream/node_server.py`` (next to the catalogs it serves;
``python -m sessionwatch.upstream.node_server`` runs it too). The CLI reaches it here, so that the faces
depend on the engine and never on what lies below it. Only the ``node`` command imports this module: it
loads the node's HTTP server, which nothing else in the engine does.
"""

from __future__ import annotations

from ..upstream.node_server import create_node_app, node_token, serve_node

__all__ = ["create_node_app", "node_token", "serve_node"]
