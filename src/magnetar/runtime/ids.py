"""Id generation.

Theory of operation: ids that only need to be unique within a process
(request ids, producer/consumer ids, connection ids) come from an
:class:`IdGenerator`, a plain counter that tests can start anywhere.  Ids that
must be unique across a cluster (ledger ids, producer names) come from the
metadata store (sequential nodes / counters), not from here.
"""

from __future__ import annotations

import itertools


class IdGenerator:
    def __init__(self, start: int = 0) -> None:
        self._counter = itertools.count(start)

    def next(self) -> int:
        return next(self._counter)
