"""What the node server (``sessionwatch node``, ``node_server.py``, a face) serves: this machine's transcript
catalogs and their pages of items, read-only.

The reading lives below the engine, in ``upstream/`` (``catalogs.py``, ``node_items.py``), beside the gateway's
own reading of the same files; the node's HTTP server is a face and reaches it here, so no face imports what
lies below the engine, and the engine knows nothing of HTTP.
"""

from __future__ import annotations

from ..upstream.catalogs import CATALOG_IDS, LocalCatalog, check_thread_id
from ..upstream.node_items import check_before, check_limit, items_page

__all__ = ["CATALOG_IDS", "LocalCatalog", "check_before", "check_limit", "check_thread_id", "items_page"]
