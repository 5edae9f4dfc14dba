"""Transaction ids and the coordinator's state machine (one table, as Pulsar's TxnStatus).

Theory of operation: a transaction id is two unsigned 64-bit numbers, ``most`` = the id of
the coordinator that created it, ``least`` = that coordinator's sequence number.  The
transitions a transaction may take are in ``TRANSITIONS``; :func:`check_transition` is the
only judge (a request that would break it is answered InvalidTxnStatus)::

    OPEN --commit--> COMMITTING --all participants done--> COMMITTED
    OPEN --abort---> ABORTING ----all participants done--> ABORTED
    OPEN --timeout-> TIMEOUT -----(aborted like ABORTING)--> ABORTED
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from magnetar.broker.transaction.errors import InvalidTxnStatusError


class TxnID(NamedTuple):
    most: int
    least: int

    def __str__(self) -> str:
        return f"({self.most},{self.least})"

    @classmethod
    def parse(cls, text: str) -> TxnID:
        """``"(1,2)"`` or ``"1:2"`` or ``"1,2"`` -> TxnID (admin paths and CLI)."""
        parts = text.strip("() ").replace(":", ",").split(",")
        if len(parts) != 2:
            raise ValueError(f"transaction id {text!r}: expected most,least")
        return cls(int(parts[0]), int(parts[1]))


class TxnState(enum.Enum):
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    TIMEOUT = "TIMEOUT"

    @property
    def ending(self) -> bool:
        return self in (TxnState.COMMITTING, TxnState.ABORTING, TxnState.TIMEOUT)

    @property
    def final(self) -> bool:
        return self in (TxnState.COMMITTED, TxnState.ABORTED)


TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.OPEN: frozenset({TxnState.COMMITTING, TxnState.ABORTING, TxnState.TIMEOUT}),
    TxnState.COMMITTING: frozenset({TxnState.COMMITTED}),
    TxnState.ABORTING: frozenset({TxnState.ABORTED}),
    TxnState.TIMEOUT: frozenset({TxnState.ABORTED}),
    TxnState.COMMITTED: frozenset(),
    TxnState.ABORTED: frozenset(),
}


def check_transition(txnid: TxnID, old: TxnState, new: TxnState) -> None:
    if new not in TRANSITIONS[old]:
        raise InvalidTxnStatusError(f"Transaction {txnid} is {old.value}, cannot become {new.value}")
