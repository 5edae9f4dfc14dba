"""Helpers of the transaction tests (a module name no other test directory uses, so the
full run imports this one and not another directory's helper)."""

from __future__ import annotations

from pathlib import Path

from magnetar.testing.standalone import StandaloneProcess

TXN_CONFIG = """\
transactionCoordinatorEnabled=true
magnetarTransactionCoordinatorCount=2
magnetarTransactionTimeoutCheckIntervalMs=100
transactionBufferSnapshotMinTimeInMillis=1000
"""


def txn_standalone(base: Path, extra: str = "") -> StandaloneProcess:
    """A ``magnetar standalone`` with transactions on (two coordinators) under ``base``."""
    conf = base / "txn.conf"
    conf.write_text(TXN_CONFIG + extra)
    return StandaloneProcess(base / "data", config_file=conf)
