"""Magnetar: Apache Pulsar, re-implemented in Python.

The package is layered as ../shared/DESIGN.md describes: runtime/common/proto at
the bottom, then the protocol codec, the storage stack (metadata, bookie,
bookkeeper, managed_ledger), the broker and clients, and composition roots
(app, web, cli) on top.  Arrows point down; import-linter checks them.
"""

__version__ = "0.1.0"
