"""What every sessionwatch HTTP server shares: the gateway (``http/``), ``sessionwatch node``
(``node_server.py``) and ``sessionwatch mcp --transport http`` (``mcpserver/run.py``).

``origin`` (Host/Origin/Content-Type guard), ``limits`` (connection limits inside uvicorn), ``exposure``
(loopback, token rules, token files), ``options`` (the shared command-line options) and ``wire`` (JSON
bytes). It sits below the engine and the faces so that ``upstream`` can serve a node without importing a
face (see ARCHITECTURE.md, Checks).
"""
