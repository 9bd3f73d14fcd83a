"""Test support shipped with the package: the store conformance suite.

A third-party storage backend proves itself with one subclass (needs the ``testing`` extra: ``pip install -e
'.[testing]'`` in a clone)::

    from contextlib import ExitStack

    from sessionwatch.testing import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self, cleanup: ExitStack) -> MyStore:
            ...

See docs/python.md, "Proving a third-party store".
"""

from __future__ import annotations

from .conformance import StoreConformance
from .suite import Stores, SuiteBase

__all__ = ["StoreConformance", "Stores", "SuiteBase"]
